//! Collectives on intercommunicators.
//!
//! Every collective the standard defines on an intercommunicator (barrier, broadcast, gather(v),
//! scatter(v), allgather(v), all-to-all (v, w), reduce, allreduce, reduce-scatter (block)) is a
//! short sequence of *phases* run by the ordinary executor ([`super::exec`]): each phase is an
//! algorithm on one communicator, either the intercommunicator itself (point-to-point with remote
//! ranks: an [`Exchange`]) or its hidden local intracommunicator (any of the intracommunicator
//! algorithms, planned as usual). The phases are all planned when the call starts, so the
//! non-blocking forms need nothing but the engine's progress: when one phase has finished at this
//! process the executor starts the next.
//!
//! The shapes are those of Open MPI's `coll/inter`:
//!
//! | call | phases |
//! | --- | --- |
//! | barrier | local barrier; leaders swap empty messages; local barrier |
//! | bcast | root to the remote leader; broadcast in the receiving group |
//! | gather(v), scatter(v) | the root and every remote rank, directly |
//! | allgather(v), all-to-all(v, w) | every rank and every remote rank, directly, in batches |
//! | reduce | reduce in the non-root group to its leader; leader to root |
//! | allreduce | reduce in each group to its leader; leaders swap; broadcast in each group |
//! | reduce-scatter (block) | reduce in each group to its leader; leaders swap; scatter in each group |
//!
//! A group's leader is its rank 0. Staging at the leaders (the reductions' results) comes from the
//! non-blocking collectives' scratch pool, so a reduction's vector must fit `coll_scratch_bytes`
//! (twice, for a reduce-scatter).
//!
//! **Tags.** Each call takes one collective sequence number from the intercommunicator (its
//! remote phases' tag) and one from the local communicator (its local phases' tag), at every
//! member whatever its role, so both sides of every pair agree. Phases of one call that run on the
//! same communicator share its tag: a process starts a phase only when its previous one has
//! finished, and messages between a pair under one tag match in the order they were posted, so
//! phase `k` traffic never meets phase `k + 1` traffic.
//!
//! `MPI_IN_PLACE` is not allowed on an intercommunicator (`MPI_ERR_BUFFER`); scans are not defined
//! there (`MPI_ERR_COMM`).

use super::alg::{Alg, Blocks, Grp};
use super::exec::{Acts, Coll, Phase, Scratch, Span, BATCH, MAX_PHASES, MORE_SCRATCH};
use super::{
    check_counts, span_bytes, uniform, vblocks, wblocks, Buf, Call, Colls, Mode, Planned, GRANULE,
    MAX_ACTIVE, TAG_BASE,
};
use crate::comm::CommId;
use crate::datatype::Datatype;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::op::Op;
use crate::pml::request::{ReqId, PROC_NULL};

/// `MPI_ROOT`: the root of a rooted collective on an intercommunicator, in the root's group.
pub const ROOT: i32 = -3;

/// One side (sends or receives) of an [`Exchange`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Side {
    /// Nothing.
    Nothing,
    /// One message with remote rank `rank`.
    One { rank: u32, span: Span },
    /// Block `i` with remote rank `i`, for `i < n`.
    Each { n: u32, blocks: Blocks },
    /// The same span to every remote rank `i < n` (sends only).
    Same { n: u32, span: Span },
}

impl Side {
    /// Remote ranks addressed (one past the highest).
    fn reach(&self) -> u32 {
        match *self {
            Side::Nothing => 0,
            Side::One { .. } => 1,
            Side::Each { n, .. } | Side::Same { n, .. } => n,
        }
    }

    /// The message with remote rank `i`, if `i` is addressed in the batch `lo..hi`.
    fn yield_batch(&self, lo: u32, hi: u32, mut f: impl FnMut(u32, Span)) {
        match *self {
            Side::Nothing => {}
            Side::One { rank, span } => {
                if lo == 0 {
                    f(rank, span)
                }
            }
            Side::Each { n, blocks } => (lo..hi.min(n)).for_each(|i| f(i, blocks.block(i))),
            Side::Same { n, span } => (lo..hi.min(n)).for_each(|i| f(i, span)),
        }
    }
}

/// Point-to-point between this process and ranks of the remote group, in batches of
/// [`BATCH`] remote ranks per step (batch `k` of the sends and of the receives in step `k`).
///
/// No cycle of waits can form: the messages between batch `i` of one group and batch `j` of the
/// other are posted in step `j` on the first side and step `i` on the other, so they can all
/// complete once every pair of batches `(i', j')` with `i' + j' < i + j` has.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Exchange {
    pub send: Side,
    pub recv: Side,
}

impl Exchange {
    const NOTHING: Exchange = Exchange {
        send: Side::Nothing,
        recv: Side::Nothing,
    };

    pub(crate) fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let steps = self.send.reach().max(self.recv.reach()).div_ceil(BATCH);
        if k >= steps {
            return false;
        }
        let (lo, hi) = (k * BATCH, (k + 1) * BATCH);
        self.recv.yield_batch(lo, hi, |i, s| a.recv(i, s));
        self.send.yield_batch(lo, hi, |i, s| a.send(i, s));
        true
    }
}

/// What a process does in a rooted collective on an intercommunicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// `MPI_ROOT`: the root itself.
    Root,
    /// `MPI_PROC_NULL`: another member of the root's group; takes no part.
    Idle,
    /// A member of the other group; the root is remote rank `.0`.
    Leaf(u32),
}

fn role(root: i32, remote: u32) -> Result<Role> {
    match root {
        ROOT => Ok(Role::Root),
        PROC_NULL => Ok(Role::Idle),
        r if r >= 0 && (r as u32) < remote => Ok(Role::Leaf(r as u32)),
        r => Err(Error::new(
            ErrorClass::Root,
            Reason::RankOutOfRange {
                rank: r,
                size: remote,
            },
        )),
    }
}

fn no_in_place<T>(b: Option<T>) -> Result<T> {
    b.ok_or(Error::new(
        ErrorClass::Buffer,
        Reason::BadArgument {
            what: "MPI_IN_PLACE is not allowed on an intercommunicator",
        },
    ))
}

fn no_scan() -> Error {
    Error::new(
        ErrorClass::Comm,
        Reason::BadArgument {
            what: "MPI_Scan and MPI_Exscan are not defined on intercommunicators",
        },
    )
}

/// An intercommunicator collective planned: its first phase, the later ones, their scratch.
struct Plan {
    first: Planned,
    first_comm: CommId,
    first_tag: i32,
    later: [Option<Phase>; MAX_PHASES],
    scratch: [Scratch; MORE_SCRATCH],
    n_later: usize,
    n_scratch: usize,
}

impl Plan {
    fn keep(&mut self, s: Scratch) {
        if s != Scratch::None {
            self.scratch[self.n_scratch] = s;
            self.n_scratch += 1;
        }
    }

    fn push(&mut self, comm: CommId, tag: i32, p: Planned) {
        self.keep(p.scratch);
        self.later[self.n_later] = Some(Phase {
            comm,
            tag,
            alg: p.alg,
            red: p.red,
            segs: p.segs,
        });
        self.n_later += 1;
    }
}

/// The communicators and tags of one call.
#[derive(Clone, Copy)]
struct Ctx {
    inter: CommId,
    local: CommId,
    /// This process in its (local) group.
    g: Grp,
    /// Size of the remote group.
    q: u32,
    ti: i32,
    tl: i32,
}

fn exchange(e: Exchange) -> Planned {
    Planned::new(Alg::Inter(e))
}

impl Colls<'_> {
    /// Plans collective `call` on intercommunicator `comm` (see the module doc): the
    /// collective to run or launch, and the datatypes it holds.
    ///
    /// # Safety
    /// As for [`super::collective`].
    ///
    /// `tags` gives the remote and the local phases' tags instead of the next collective
    /// sequence numbers (see [`Colls::collective_tagged`]).
    pub(super) unsafe fn inter_plan(
        &mut self,
        comm: CommId,
        call: Call,
        mode: Mode,
        tags: Option<(i32, i32)>,
    ) -> Result<(Coll, [Option<Datatype>; 3])> {
        let c = self.check_comm(comm)?;
        let local = c.local_comm.ok_or(Error::internal(
            "intercommunicator without its local communicator",
        ))?;
        let g = Grp {
            rank: c.rank,
            size: c.size(),
        };
        let q = c.peers().size();
        if matches!(call, Call::Scan { .. } | Call::Exscan { .. }) {
            return Err(no_scan());
        }
        if matches!(mode, Mode::NonBlocking { .. }) && !self.coll.pool.reserve() {
            return Err(self
                .coll
                .pool
                .exhausted("non-blocking collectives in flight", MAX_ACTIVE.name));
        }
        // Every member takes both sequence numbers whatever its role (see the module doc).
        let (ti, tl) = match tags {
            Some(t) => t,
            None => (
                TAG_BASE - (self.p2p.comms.next_coll_seq(comm) & 0x3fff_ffff) as i32,
                TAG_BASE - (self.p2p.comms.next_coll_seq(local) & 0x3fff_ffff) as i32,
            ),
        };
        let cx = Ctx {
            inter: comm,
            local,
            g,
            q,
            ti,
            tl,
        };
        let mut plan = Plan {
            first: Planned::new(Alg::Nothing),
            first_comm: cx.inter,
            first_tag: cx.ti,
            later: [None; MAX_PHASES],
            scratch: [Scratch::None; MORE_SCRATCH],
            n_later: 0,
            n_scratch: 0,
        };
        // SAFETY: the caller's contract.
        if let Err(e) = unsafe { self.inter_phases(cx, call, &mut plan) } {
            self.ungrab(plan.first.scratch);
            plan.scratch.iter().for_each(|s| self.ungrab(*s));
            return Err(e);
        }
        let mut c = Coll::new(plan.first_comm, plan.first_tag, plan.first.alg);
        c.red = plan.first.red;
        c.segs = plan.first.segs;
        c.scratch = plan.first.scratch;
        c.phases = plan.later;
        c.more_scratch = plan.scratch;
        Ok((c, plan.first.holds))
    }

    /// Starts non-blocking collective `call` on `comm` under tags the caller chose instead of
    /// the communicator's next collective sequence numbers: `tag` (an intercommunicator's remote
    /// phases) and `local_tag` (its local phases; unused on an intracommunicator). For
    /// collectives the library runs for itself from progress (`MPI_Comm_idup`'s agreement),
    /// whose start order at each member is not the user's call order, so they cannot take
    /// sequence numbers as they start; the caller took them at the user's call instead.
    ///
    /// # Safety
    /// As for [`super::collective`].
    pub(crate) unsafe fn collective_tagged(
        &mut self,
        comm: CommId,
        call: Call,
        scope: u32,
        tag: i32,
        local_tag: i32,
    ) -> Result<ReqId> {
        let mode = Mode::NonBlocking { scope };
        let c = self.check_comm(comm)?;
        if c.is_inter() {
            // SAFETY: the caller's contract.
            let (c, holds) = unsafe { self.inter_plan(comm, call, mode, Some((tag, local_tag)))? };
            return self.launch(c, holds, scope);
        }
        {
            let g = Grp {
                rank: c.rank,
                size: c.size(),
            };
            if !self.coll.pool.reserve() {
                return Err(self
                    .coll
                    .pool
                    .exhausted("non-blocking collectives in flight", MAX_ACTIVE.name));
            }
            // SAFETY: the caller's contract.
            let pl = unsafe { self.plan(comm, g, call, mode)? };
            let mut c = Coll::new(comm, tag, pl.alg);
            c.red = pl.red;
            c.segs = pl.segs;
            c.scratch = pl.scratch;
            self.launch(c, pl.holds, scope)
        }
    }

    /// The tag of the next collective on `comm` (taking its sequence number), for
    /// [`Colls::collective_tagged`].
    // Reached only from the C API.
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub(crate) fn next_coll_tag(&mut self, comm: CommId) -> i32 {
        TAG_BASE - (self.p2p.comms.next_coll_seq(comm) & 0x3fff_ffff) as i32
    }

    /// Scratch from the pool (never the blocking region, which a later phase's own planning may
    /// take while this is still in use).
    fn inter_grab(&mut self, need: usize, plan: &mut Plan) -> Result<*mut u8> {
        let (sc, p) = self.grab(need, Mode::NonBlocking { scope: 0 })?;
        plan.keep(sc);
        Ok(p)
    }

    /// Plans an intracommunicator collective on the local group (scratch from the pool).
    ///
    /// # Safety
    /// As for [`super::collective`].
    unsafe fn local_plan(&mut self, cx: Ctx, call: Call) -> Result<Planned> {
        // SAFETY: the caller's contract.
        unsafe { self.plan(cx.local, cx.g, call, Mode::NonBlocking { scope: 0 }) }
    }

    /// Fills `plan` with the phases of `call`.
    ///
    /// # Safety
    /// As for [`super::collective`].
    unsafe fn inter_phases(&mut self, cx: Ctx, call: Call, plan: &mut Plan) -> Result<()> {
        let (q, leader) = (cx.q, cx.g.rank == 0);
        let first = |plan: &mut Plan, comm: CommId, tag: i32, p: Planned| {
            plan.first = p;
            plan.first_comm = comm;
            plan.first_tag = tag;
        };
        match call {
            Call::Barrier => {
                // SAFETY: a barrier has no buffers.
                let b = unsafe { self.local_plan(cx, Call::Barrier)? };
                first(plan, cx.local, cx.tl, b);
                let swap = if leader {
                    Exchange {
                        send: Side::One {
                            rank: 0,
                            span: Span::empty(),
                        },
                        recv: Side::One {
                            rank: 0,
                            span: Span::empty(),
                        },
                    }
                } else {
                    Exchange::NOTHING
                };
                plan.push(cx.inter, cx.ti, exchange(swap));
                // SAFETY: as above.
                let b = unsafe { self.local_plan(cx, Call::Barrier)? };
                plan.push(cx.local, cx.tl, b);
            }
            Call::Bcast { buf, root } => match role(root, q)? {
                Role::Idle => {}
                Role::Root => {
                    self.p2p.types.check_committed(buf.dt)?;
                    let mut p = exchange(Exchange {
                        send: Side::One {
                            rank: 0,
                            span: buf.span(),
                        },
                        recv: Side::Nothing,
                    });
                    p.holds[0] = Some(buf.dt);
                    first(plan, cx.inter, cx.ti, p);
                }
                Role::Leaf(r) => {
                    self.p2p.types.check_committed(buf.dt)?;
                    let e = if leader {
                        Exchange {
                            send: Side::Nothing,
                            recv: Side::One {
                                rank: r,
                                span: buf.span(),
                            },
                        }
                    } else {
                        Exchange::NOTHING
                    };
                    let mut p = exchange(e);
                    p.holds[0] = Some(buf.dt);
                    first(plan, cx.inter, cx.ti, p);
                    // SAFETY: the caller's contract.
                    let b = unsafe { self.local_plan(cx, Call::Bcast { buf, root: 0 })? };
                    plan.push(cx.local, cx.tl, b);
                }
            },
            Call::Gather { send, recv, root }
            | Call::Scatter {
                send: recv,
                recv: send,
                root,
            } => {
                let gather = matches!(call, Call::Gather { .. });
                let (blocks, dt) = match role(root, q)? {
                    Role::Idle => return Ok(()),
                    Role::Root => (
                        Side::Each {
                            n: q,
                            blocks: uniform(&self.p2p.types, &recv)?,
                        },
                        recv.dt,
                    ),
                    Role::Leaf(r) => {
                        let s = no_in_place(send)?;
                        self.p2p.types.check_committed(s.dt)?;
                        (
                            Side::One {
                                rank: r,
                                span: s.span(),
                            },
                            s.dt,
                        )
                    }
                };
                let mut p = exchange(one_way(gather, blocks));
                p.holds[0] = Some(dt);
                first(plan, cx.inter, cx.ti, p);
            }
            Call::Gatherv { send, recv, root } => {
                let (side, dt) = match role(root, q)? {
                    Role::Idle => return Ok(()),
                    Role::Root => (
                        Side::Each {
                            n: q,
                            blocks: vblocks(&self.p2p.types, &recv, q)?,
                        },
                        recv.dt,
                    ),
                    Role::Leaf(r) => {
                        let s = no_in_place(send)?;
                        self.p2p.types.check_committed(s.dt)?;
                        (
                            Side::One {
                                rank: r,
                                span: s.span(),
                            },
                            s.dt,
                        )
                    }
                };
                let mut p = exchange(one_way(true, side));
                p.holds[0] = Some(dt);
                first(plan, cx.inter, cx.ti, p);
            }
            Call::Scatterv { send, recv, root } => {
                let (side, dt) = match role(root, q)? {
                    Role::Idle => return Ok(()),
                    Role::Root => (
                        Side::Each {
                            n: q,
                            blocks: vblocks(&self.p2p.types, &send, q)?,
                        },
                        send.dt,
                    ),
                    Role::Leaf(r) => {
                        let s = no_in_place(recv)?;
                        self.p2p.types.check_committed(s.dt)?;
                        (
                            Side::One {
                                rank: r,
                                span: s.span(),
                            },
                            s.dt,
                        )
                    }
                };
                let mut p = exchange(one_way(false, side));
                p.holds[0] = Some(dt);
                first(plan, cx.inter, cx.ti, p);
            }
            Call::Allgather { send, recv } => {
                let s = no_in_place(send)?;
                self.p2p.types.check_committed(s.dt)?;
                let mut p = exchange(Exchange {
                    send: Side::Same {
                        n: q,
                        span: s.span(),
                    },
                    recv: Side::Each {
                        n: q,
                        blocks: uniform(&self.p2p.types, &recv)?,
                    },
                });
                p.holds = [Some(s.dt), Some(recv.dt), None];
                first(plan, cx.inter, cx.ti, p);
            }
            Call::Allgatherv { send, recv } => {
                let s = no_in_place(send)?;
                self.p2p.types.check_committed(s.dt)?;
                let mut p = exchange(Exchange {
                    send: Side::Same {
                        n: q,
                        span: s.span(),
                    },
                    recv: Side::Each {
                        n: q,
                        blocks: vblocks(&self.p2p.types, &recv, q)?,
                    },
                });
                p.holds = [Some(s.dt), Some(recv.dt), None];
                first(plan, cx.inter, cx.ti, p);
            }
            Call::Alltoall { send, recv } => {
                let s = no_in_place(send)?;
                let mut p = exchange(Exchange {
                    send: Side::Each {
                        n: q,
                        blocks: uniform(&self.p2p.types, &s)?,
                    },
                    recv: Side::Each {
                        n: q,
                        blocks: uniform(&self.p2p.types, &recv)?,
                    },
                });
                p.holds = [Some(s.dt), Some(recv.dt), None];
                first(plan, cx.inter, cx.ti, p);
            }
            Call::Alltoallv { send, recv } => {
                let s = no_in_place(send)?;
                let mut p = exchange(Exchange {
                    send: Side::Each {
                        n: q,
                        blocks: vblocks(&self.p2p.types, &s, q)?,
                    },
                    recv: Side::Each {
                        n: q,
                        blocks: vblocks(&self.p2p.types, &recv, q)?,
                    },
                });
                p.holds = [Some(s.dt), Some(recv.dt), None];
                first(plan, cx.inter, cx.ti, p);
            }
            Call::Alltoallw { send, recv } => {
                let s = no_in_place(send)?;
                let p = exchange(Exchange {
                    send: Side::Each {
                        n: q,
                        blocks: wblocks(&self.p2p.types, &s, q)?,
                    },
                    recv: Side::Each {
                        n: q,
                        blocks: wblocks(&self.p2p.types, &recv, q)?,
                    },
                });
                first(plan, cx.inter, cx.ti, p);
            }
            Call::Reduce {
                send,
                recv,
                count,
                dt,
                op,
                root,
            } => match role(root, q)? {
                Role::Idle => {}
                Role::Root => {
                    self.p2p.types.check_committed(dt)?;
                    let mut p = exchange(Exchange {
                        send: Side::Nothing,
                        recv: Side::One {
                            rank: 0,
                            span: Span::new(recv, count, dt),
                        },
                    });
                    p.holds[0] = Some(dt);
                    first(plan, cx.inter, cx.ti, p);
                }
                Role::Leaf(r) => {
                    let send = no_in_place(send)?;
                    // SAFETY: the caller's contract.
                    let (red, staged) =
                        unsafe { self.reduce_to_leader(cx, send, count, dt, op, plan)? };
                    first(plan, cx.local, cx.tl, red);
                    let e = if leader {
                        Exchange {
                            send: Side::One {
                                rank: r,
                                span: staged,
                            },
                            recv: Side::Nothing,
                        }
                    } else {
                        Exchange::NOTHING
                    };
                    plan.push(cx.inter, cx.ti, exchange(e));
                }
            },
            Call::Allreduce {
                send,
                recv,
                count,
                dt,
                op,
            } => {
                let send = no_in_place(send)?;
                // SAFETY: the caller's contract.
                let (red, staged) =
                    unsafe { self.reduce_to_leader(cx, send, count, dt, op, plan)? };
                first(plan, cx.local, cx.tl, red);
                plan.push(
                    cx.inter,
                    cx.ti,
                    exchange(swap(leader, staged, Span::new(recv, count, dt))),
                );
                let buf = Buf {
                    ptr: recv,
                    count,
                    dt,
                };
                // SAFETY: the caller's contract.
                let b = unsafe { self.local_plan(cx, Call::Bcast { buf, root: 0 })? };
                plan.push(cx.local, cx.tl, b);
            }
            Call::ReduceScatterBlock {
                send,
                recv,
                count,
                dt,
                op,
            } => {
                let send = no_in_place(send)?;
                let total = count * cx.g.size as u64;
                // SAFETY: the caller's contract.
                let (red, staged) =
                    unsafe { self.reduce_to_leader(cx, send, total, dt, op, plan)? };
                first(plan, cx.local, cx.tl, red);
                let theirs = self.leader_stage(leader, total, dt, plan)?;
                plan.push(cx.inter, cx.ti, exchange(swap(leader, staged, theirs)));
                let call = Call::Scatter {
                    send: Buf {
                        ptr: theirs.ptr,
                        count,
                        dt,
                    },
                    recv: Some(Buf {
                        ptr: recv,
                        count,
                        dt,
                    }),
                    root: 0,
                };
                // SAFETY: the caller's contract; the staging lives as long as the collective.
                let s = unsafe { self.local_plan(cx, call)? };
                plan.push(cx.local, cx.tl, s);
            }
            Call::ReduceScatter {
                send,
                recv,
                counts,
                dt,
                op,
            } => {
                let send = no_in_place(send)?;
                let p = cx.g.size;
                check_counts(counts, p)?;
                // SAFETY: checked: an entry per member of the local group.
                let counts_of = |i: u32| unsafe { counts.get(i as usize) };
                let total: u64 = (0..p).map(|i| counts_of(i) as u64).sum();
                // SAFETY: the caller's contract.
                let (red, staged) =
                    unsafe { self.reduce_to_leader(cx, send, total, dt, op, plan)? };
                first(plan, cx.local, cx.tl, red);
                let theirs = self.leader_stage(leader, total, dt, plan)?;
                plan.push(cx.inter, cx.ti, exchange(swap(leader, staged, theirs)));
                // The leader scatters with displacements it computes into scratch.
                let displs = if leader {
                    let d = self.inter_grab(8 * p as usize, plan)?.cast::<i64>();
                    let mut at = 0i64;
                    for i in 0..p {
                        // SAFETY: `d` is scratch for `p` 64-bit ints, 64-byte aligned.
                        unsafe { d.add(i as usize).write(at) };
                        at += counts_of(i);
                    }
                    super::ints::Ints::Wide(d.cast_const())
                } else {
                    super::ints::Ints::NULL
                };
                let call = Call::Scatterv {
                    send: super::VBuf {
                        ptr: theirs.ptr,
                        counts,
                        displs,
                        dt,
                    },
                    recv: Some(Buf {
                        ptr: recv,
                        count: counts_of(cx.g.rank) as u64,
                        dt,
                    }),
                    root: 0,
                };
                // SAFETY: the caller's contract; the staging lives as long as the collective.
                let s = unsafe { self.local_plan(cx, call)? };
                plan.push(cx.local, cx.tl, s);
            }
            // Rejected before planning already.
            Call::Scan { .. } | Call::Exscan { .. } => return Err(no_scan()),
            Call::Neighbor { .. } => {
                return Err(Error::new(
                    ErrorClass::Topology,
                    Reason::BadArgument {
                        what: "neighbourhood collectives need a topology, which intercommunicators do not have",
                    },
                ))
            }
        }
        Ok(())
    }

    /// At the leader, scratch for `count` instances of `dt` laid out as a user buffer would be
    /// (a span of them); elsewhere an empty span.
    fn leader_stage(
        &mut self,
        leader: bool,
        count: u64,
        dt: Datatype,
        plan: &mut Plan,
    ) -> Result<Span> {
        if !leader {
            return Ok(Span::new(core::ptr::null_mut(), 0, dt));
        }
        let info = *self.p2p.types.check_committed(dt)?;
        let s = Span::new(core::ptr::null_mut(), count, dt);
        let need = span_bytes(&self.p2p.types, &s).next_multiple_of(GRANULE);
        let p = self.inter_grab(need, plan)?;
        Ok(Span::new(p.wrapping_offset(-info.true_lb), count, dt))
    }

    /// Plans the reduction of every local member's `send` to the leader, into staging there;
    /// returns the phase and the staging (an empty span elsewhere).
    ///
    /// # Safety
    /// As for [`super::collective`].
    unsafe fn reduce_to_leader(
        &mut self,
        cx: Ctx,
        send: *const u8,
        count: u64,
        dt: Datatype,
        op: Op,
        plan: &mut Plan,
    ) -> Result<(Planned, Span)> {
        let staged = self.leader_stage(cx.g.rank == 0, count, dt, plan)?;
        let call = Call::Reduce {
            send: Some(send),
            recv: staged.ptr,
            count,
            dt,
            op,
            root: 0,
        };
        // SAFETY: the caller's contract; the staging lives as long as the collective.
        let p = unsafe { self.local_plan(cx, call)? };
        let staged = if cx.g.rank == 0 {
            staged
        } else {
            Span::new(core::ptr::null_mut(), 0, dt)
        };
        Ok((p, staged))
    }
}

/// A rooted one-way exchange: `side` is what the root receives (gather) or sends (scatter),
/// or a leaf's one message the other way.
fn one_way(gather: bool, side: Side) -> Exchange {
    let at_root = matches!(side, Side::Each { .. });
    match (gather, at_root) {
        (true, true) | (false, false) => Exchange {
            send: Side::Nothing,
            recv: side,
        },
        _ => Exchange {
            send: side,
            recv: Side::Nothing,
        },
    }
}

/// The leaders' swap: this group's staged result out, the other group's in.
fn swap(leader: bool, mine: Span, theirs: Span) -> Exchange {
    if !leader {
        return Exchange::NOTHING;
    }
    Exchange {
        send: Side::One {
            rank: 0,
            span: mine,
        },
        recv: Side::One {
            rank: 0,
            span: theirs,
        },
    }
}

#[cfg(test)]
mod tests {
    //! The exchanges of every rank of two groups run in one process over an in-memory network
    //! with *rendezvous* semantics (a send completes only when a receive has matched it, in order
    //! per pair), so a cycle of waits between batches would show as a deadlock.

    #![allow(clippy::needless_range_loop)]

    extern crate std;

    use std::collections::{HashMap, VecDeque};
    use std::vec;
    use std::vec::Vec;

    use super::*;
    use crate::coll::exec::{self, copy_stream, type_size};
    use crate::datatype::table::tests::table;

    struct R {
        ex: Exchange,
        /// Global index of remote rank 0 (the other group's first).
        remote_base: u32,
        step: u32,
        open: usize,
        done: bool,
    }

    /// Runs every rank's exchange to its end; panics on a deadlock or a size mismatch.
    fn run(ranks: &mut [R]) {
        let t = table();
        type Key = (u32, u32);
        let mut sends: HashMap<Key, VecDeque<Vec<u8>>> = HashMap::new();
        let mut recvs: HashMap<Key, VecDeque<Span>> = HashMap::new();
        loop {
            let mut progressed = false;
            for me in 0..ranks.len() {
                let r = &mut ranks[me];
                if r.done || r.open > 0 {
                    continue;
                }
                let mut acts = Acts::new();
                let more = r.ex.step(r.step, &mut acts);
                r.step += 1;
                progressed = true;
                if !more {
                    r.done = true;
                    continue;
                }
                for a in acts.list() {
                    match *a {
                        exec::Act::Recv(from, s) => {
                            let key = (r.remote_base + from, me as u32);
                            recvs.entry(key).or_default().push_back(s);
                            r.open += 1;
                        }
                        exec::Act::Send(to, s) => {
                            let len = s.count * type_size(&t, s.dt);
                            let mut m = vec![0u8; len as usize];
                            let dst = Span::bytes(m.as_mut_ptr(), len);
                            // SAFETY: the test's buffers.
                            unsafe { copy_stream(&t, dst, 0, s, 0, len).unwrap() };
                            let key = (me as u32, r.remote_base + to);
                            sends.entry(key).or_default().push_back(m);
                            r.open += 1;
                        }
                        _ => panic!("an exchange yields only sends and receives"),
                    }
                }
            }
            for (&(from, to), q) in sends.iter_mut() {
                let Some(rq) = recvs.get_mut(&(from, to)) else {
                    continue;
                };
                while !q.is_empty() && !rq.is_empty() {
                    let mut m = q.pop_front().unwrap();
                    let s = rq.pop_front().unwrap();
                    assert_eq!(m.len() as u64, s.count * type_size(&t, s.dt), "size");
                    let src = Span::bytes(m.as_mut_ptr(), m.len() as u64);
                    // SAFETY: the test's buffers.
                    unsafe { copy_stream(&t, s, 0, src, 0, m.len() as u64).unwrap() };
                    ranks[from as usize].open -= 1;
                    ranks[to as usize].open -= 1;
                    progressed = true;
                }
            }
            if ranks.iter().all(|r| r.done) {
                return;
            }
            assert!(progressed, "deadlock");
        }
    }

    fn ints(v: &mut [i32], count: u64) -> Blocks {
        Blocks::Uniform {
            base: v.as_mut_ptr().cast(),
            count,
            dt: Datatype::INT,
            ext: 4,
        }
    }

    /// An all-to-all between groups of `p` and `q` (several batches when large).
    fn alltoall(p: u32, q: u32) {
        const N: u64 = 2;
        let n = (p + q) as usize;
        let size = |g: usize| if g < p as usize { q } else { p };
        let val = |from: usize, to: usize, i: u64| (from * 1000 + to) as i32 * 10 + i as i32;
        let mut send: Vec<Vec<i32>> = (0..n)
            .map(|g| {
                let base = if g < p as usize { p as usize } else { 0 };
                (0..size(g) as usize)
                    .flat_map(|j| (0..N).map(move |i| val(g, base + j, i)))
                    .collect()
            })
            .collect();
        let mut recv: Vec<Vec<i32>> = (0..n)
            .map(|g| vec![-1; size(g) as usize * N as usize])
            .collect();
        let mut ranks: Vec<R> = (0..n)
            .map(|g| R {
                ex: Exchange {
                    send: Side::Each {
                        n: size(g),
                        blocks: ints(&mut send[g], N),
                    },
                    recv: Side::Each {
                        n: size(g),
                        blocks: ints(&mut recv[g], N),
                    },
                },
                remote_base: if g < p as usize { p } else { 0 },
                step: 0,
                open: 0,
                done: false,
            })
            .collect();
        run(&mut ranks);
        for g in 0..n {
            let base = if g < p as usize { p as usize } else { 0 };
            for j in 0..size(g) as usize {
                for i in 0..N {
                    assert_eq!(
                        recv[g][j * N as usize + i as usize],
                        val(base + j, g, i),
                        "rank {g} block {j}"
                    );
                }
            }
        }
    }

    #[test]
    fn alltoall_between_unequal_groups() {
        alltoall(1, 1);
        alltoall(1, 3);
        alltoall(3, 2);
    }

    /// Past one batch on either side: steps pair batches without a cycle of waits.
    #[test]
    fn alltoall_in_many_batches_has_no_deadlock() {
        alltoall(2, 2 * BATCH + 5);
        alltoall(BATCH + 1, BATCH + 3);
    }

    /// A gather: the root (group 0) gets a block from each of many remote ranks, the root's
    /// group's other member takes no part.
    #[test]
    fn gather_to_a_root_of_the_other_group() {
        let q = BATCH * 2 + 3;
        let mut got = vec![-1i32; q as usize];
        let mut mine: Vec<[i32; 1]> = (0..q).map(|j| [j as i32 * 7]).collect();
        let mut ranks = vec![
            R {
                ex: one_way(
                    true,
                    Side::Each {
                        n: q,
                        blocks: ints(&mut got, 1),
                    },
                ),
                remote_base: 2,
                step: 0,
                open: 0,
                done: false,
            },
            R {
                ex: Exchange::NOTHING,
                remote_base: 2,
                step: 0,
                open: 0,
                done: false,
            },
        ];
        for m in mine.iter_mut() {
            ranks.push(R {
                ex: one_way(
                    true,
                    Side::One {
                        rank: 0,
                        span: Span::new(m.as_mut_ptr().cast(), 1, Datatype::INT),
                    },
                ),
                remote_base: 0,
                step: 0,
                open: 0,
                done: false,
            });
        }
        run(&mut ranks);
        assert_eq!(got, (0..q).map(|j| j as i32 * 7).collect::<Vec<_>>());
    }

    #[test]
    fn roots_are_read_as_the_standard_says() {
        assert_eq!(role(ROOT, 3).unwrap(), Role::Root);
        assert_eq!(role(PROC_NULL, 3).unwrap(), Role::Idle);
        assert_eq!(role(2, 3).unwrap(), Role::Leaf(2));
        assert_eq!(role(3, 3).unwrap_err().class, ErrorClass::Root);
        assert_eq!(role(-5, 3).unwrap_err().class, ErrorClass::Root);
    }
}
