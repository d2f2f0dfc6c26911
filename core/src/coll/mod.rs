//! Collective operations: blocking and non-blocking, over point-to-point with the library's own
//! negative tags, progressed by the engine without a helper thread.
//!
//! - [`exec`]: the schedule executor. An algorithm yields one step's actions at a time (sends,
//!   receives, local reductions and copies) into a bounded list; the executor posts them through
//!   the PML and moves on when they complete. Nothing is materialised beyond the current step.
//! - `alg`: the algorithms (dissemination and recursive-doubling barrier; binomial, pipelined
//!   chain and scatter-allgather broadcast; binomial and pipelined reduce; recursive doubling,
//!   ring, Rabenseifner and reduce-broadcast allreduce; linear and binomial gather and scatter;
//!   recursive doubling, Bruck, ring and linear allgather; pairwise, linear, Bruck and in-place
//!   all-to-all; ring, recursive halving and reduce-then-scatter reduce-scatter; recursive doubling
//!   and linear scans).
//! - `red`: reductions — working form, segments, conversion of derived types.
//! - [`hier`]: the node-aware layer — Barrier, Bcast, Reduce, Allreduce and Allgather (blocking)
//!   and Ibarrier, Ibcast, Iallreduce on a communicator spanning several nodes run as phases on
//!   hidden node and leader communicators (`coll_hier`); [`Engine::collective`] asks it before
//!   planning a flat algorithm on an intracommunicator.
//!
//! **Choice.** Each collective picks its algorithm from the message size, the communicator's
//! size and the operation's commutativity, by the same rule at every member (so every member
//! runs the same schedule); `coll_<name>_algorithm` forces one (an algorithm that cannot serve a
//! call — recursive doubling allgather on a non-power of two, a ring allreduce of a
//! non-commutative operation — falls back to the automatic choice). Operations that do not
//! commute only ever run algorithms that combine in rank order.
//!
//! **Bounds.** At most `coll_max_active` non-blocking collectives are in flight (their pool starts
//! small and grows within `mpi_memory_max`); their scratch
//! comes from a pool of `coll_scratch_bytes` (a first-fit range allocator), blocking ones use a
//! reserved region of four `coll_segment_bytes`. Reductions run in segments of
//! `coll_segment_bytes` (or one segment of the message's size, when smaller), so their scratch is
//! bounded whatever the message size. A collective that
//! cannot get what it needs fails with `MPI_ERR_NO_MEM` naming the parameter to raise.
//!
//! **Tags.** Each communicator numbers its collectives (every member starts them in the same
//! order, as MPI requires); collective number `s` uses tag `TAG_BASE - (s mod 2^30)`, so several
//! in flight on one communicator never mix. The range `-(2^20 + 2^30 - 1) ..= -2^20` is the
//! collectives'; other internal tags live outside it.
//!
//! **Intercommunicators** ([`inter`]): each collective is a chain of phases planned at the call —
//! algorithms on the hidden local intracommunicator and point-to-point exchanges with the remote
//! group — that the executor runs one after another (`Coll::phases`), blocking or from progress.
//! Each call takes one sequence number of the intercommunicator and one of its local
//! communicator at every member.

pub(crate) mod alg;
pub(crate) mod exec;
pub(crate) mod hier;
pub mod ints;
pub(crate) use hier::drain;
mod inter;
mod pair;
pub(crate) mod red;
pub mod sm;

#[cfg(test)]
mod sim;

use core::mem::MaybeUninit;

use alg::{
    AaKind, AgKind, Alg, Allgather, Alltoall, AlltoallBruck, AlltoallInPlace, BcastBinomial,
    BcastChain, BcastScatterAllgather, Blocks, Counts, Dissemination, Fold, GatherBinomial,
    GatherLinear, Grp, LinearBarrier, RecDblBarrier, ScatterBinomial, ScatterLinear,
};
pub use exec::UserOp;
use exec::{Act, Acts, Coll, ROp, Red, Scratch, Segs, Span, MAX_ACTS};
use ints::Ints;
use red::{RedAlg, RedKind, RedPlan};

use crate::arena::{Arena, Sizer};
use crate::comm::CommId;
use crate::datatype::convertor::{Packer, Unpacker};
use crate::datatype::table::TypeTable;
use crate::datatype::Datatype;
use crate::error::{Allowed, Error, ErrorClass, Reason, Result};
use crate::op::{self, Op};
use crate::p2p::Elements;
use crate::p2p::P2p;
use crate::params::{parse_int, Default, Kind, ParamDef, Params};
use crate::pml::request::{CollInit, PersistentKind, ReqId, SendMode, Source, Status};
use crate::pool::{Capacity, Pool};
use crate::ranges::Ranges;
use crate::shared::Inside;

/// Whether a blocking `alg` may run by [`Engine::direct`]: it only sends and receives whole
/// buffers (barriers, the binomial broadcast).
fn direct_alg(alg: &Alg) -> bool {
    matches!(
        alg,
        Alg::BcastBinomial(_)
            | Alg::Dissemination(_)
            | Alg::RecDblBarrier(_)
            | Alg::LinearBarrier(_)
    )
}

/// The barrier algorithm for a group: recursive doubling on powers of two, else dissemination,
/// unless `forced`.
fn barrier_alg(forced: BarrierAlg, g: Grp) -> Alg {
    match (forced, g.size.is_power_of_two()) {
        (BarrierAlg::Linear, _) => Alg::LinearBarrier(LinearBarrier { g }),
        (BarrierAlg::Dissemination, _) | (BarrierAlg::Auto, false) => {
            Alg::Dissemination(Dissemination { g })
        }
        _ => Alg::RecDblBarrier(RecDblBarrier {
            g,
            fold: Fold::new(g.size),
        }),
    }
}

/// Whether an optional layer of the collectives runs (`coll_hier`, `coll_sm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LayerMode {
    /// Where it applies, unless `coll_<name>_algorithm` forces an algorithm for the collective.
    Auto,
    /// Where it applies.
    On,
    /// Never.
    Off,
}

impl LayerMode {
    fn parse(text: &str) -> Option<LayerMode> {
        match text.trim() {
            "" | "auto" => Some(LayerMode::Auto),
            "on" | "1" | "yes" | "true" => Some(LayerMode::On),
            "off" | "0" | "no" | "false" => Some(LayerMode::Off),
            _ => None,
        }
    }
}

/// Largest reduction (bytes) the blocking fast paths take.
const SMALL_REDUCTION: u64 = 4096;

/// The working form of a small reduction of `count` elements of a contiguous predefined type
/// with a predefined operation; `None` for any other.
fn small_reduction(dt: Datatype, op: Op, count: u64) -> Option<Red> {
    let bytes = count * dt.size() as u64;
    (dt.is_contiguous() && !matches!(op, Op::User(_)) && bytes <= SMALL_REDUCTION && count > 0)
        .then_some(())?;
    op::check(op, dt).ok()?;
    Some(Red {
        op: ROp::Predef(op),
        w: dt,
        ext: dt.extent() as isize,
        true_lb: 0,
        true_ext: dt.extent() as isize,
        size: dt.size() as u64,
    })
}

/// `coll_segment_bytes`.
pub static SEGMENT_BYTES: ParamDef = ParamDef {
    name: "coll_segment_bytes",
    kind: Kind::Int {
        min: 4096,
        max: 1 << 28,
    },
    default: Default::Int(128 << 10),
    description:
        "Bytes per segment of a reduction's scratch buffers (blocking collectives reserve four)",
};

/// `coll_pipeline_bytes`.
pub static PIPELINE_BYTES: ParamDef = ParamDef {
    name: "coll_pipeline_bytes",
    kind: Kind::Int {
        min: 1024,
        max: 1 << 28,
    },
    default: Default::Int(64 << 10),
    description: "Bytes per message of the pipelined (chain) broadcast and reduce",
};

/// `coll_scratch_bytes`.
pub static SCRATCH_BYTES: ParamDef = ParamDef {
    name: "coll_scratch_bytes",
    kind: Kind::Int {
        min: 64 << 10,
        max: 1 << 34,
    },
    default: Default::Int(4 << 20),
    description: "Scratch memory shared by the non-blocking collectives in flight (fixed at init: collectives in flight hold pointers into it; running out is an error naming it)",
};

/// `coll_max_active`.
pub static MAX_ACTIVE: ParamDef = ParamDef {
    name: "coll_max_active",
    kind: Kind::Int {
        min: 1,
        max: 1 << 20,
    },
    default: Default::Int(1 << 20),
    description: "Most non-blocking collectives in flight at once in a process (the pool starts \
                  at 16 and grows within mpi_memory_max; their scratch is bounded by \
                  coll_scratch_bytes)",
};

/// Non-blocking collectives carved at init (the pool grows from there).
const ACTIVE_INITIAL: u32 = 16;

/// `coll_max_persistent`.
pub static MAX_PERSISTENT: ParamDef = ParamDef {
    name: "coll_max_persistent",
    kind: Kind::Int {
        min: 1,
        max: 1 << 22,
    },
    default: Default::Int(1 << 22),
    description: "Most persistent collective requests (MPI_Bcast_init, ...) alive at once in a \
                  process (the table starts at 16 and grows within mpi_memory_max)",
};

/// The table of persistent collectives: small at init, growing up to `coll_max_persistent`.
fn persistent_capacity(params: &Params) -> Capacity {
    Capacity::growing(16, params.u32(&MAX_PERSISTENT))
}

/// User-defined operations the table has room for at init.
const USER_OPS_INITIAL: usize = 64;

/// `op_max_user`.
pub static MAX_USER_OPS: ParamDef = ParamDef {
    name: "op_max_user",
    kind: Kind::Int {
        min: 1,
        max: 1 << 16,
    },
    default: Default::Int(1 << 16),
    description: "Most user-defined reduction operations alive at once (MPI_Op_create) (the table starts at 64 and grows within mpi_memory_max)",
};

macro_rules! algorithm_param {
    ($def:ident, $name:literal, $what:literal, $ty:ident: $($v:ident = $s:literal),+) => {
        #[doc = concat!("`", $name, "`.")]
        pub static $def: ParamDef = ParamDef {
            name: $name,
            kind: Kind::Str,
            default: Default::Str("auto"),
            description: concat!(
                "Algorithm of ", $what, ": auto (by message and communicator size)",
                $(", ", $s),+,
                " (or its number from 1)"
            ),
        };

        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum $ty {
            Auto,
            $($v),+
        }

        impl $ty {
            /// The algorithms' names, numbered from 1 (0 is `auto`).
            pub(crate) const NAMES: &'static [&'static str] = &[$($s),+];

            fn parse(text: &str) -> Option<$ty> {
                const ALL: &[$ty] = &[$ty::Auto, $($ty::$v),+];
                choice(text, $ty::NAMES).map(|i| ALL[i])
            }
        }
    };
}

/// The number of `text` among `names` (from 1; 0 for `auto`): a name, or a number.
pub fn choice(text: &str, names: &[&str]) -> Option<usize> {
    let t = text.trim();
    if t.is_empty() || t == "auto" || t == "0" {
        return Some(0);
    }
    names
        .iter()
        .enumerate()
        .find(|(i, s)| **s == t || parse_int(t) == Some(*i as i64 + 1))
        .map(|(i, _)| i + 1)
}

algorithm_param!(BARRIER_ALG, "coll_barrier_algorithm", "MPI_Barrier", BarrierAlg:
    Dissemination = "dissemination", RecDbl = "recursive_doubling", Linear = "linear");
algorithm_param!(BCAST_ALG, "coll_bcast_algorithm", "MPI_Bcast", BcastAlg:
    Binomial = "binomial", Pipeline = "pipeline", ScatterAllgather = "scatter_allgather");
algorithm_param!(REDUCE_ALG, "coll_reduce_algorithm", "MPI_Reduce", ReduceAlg:
    Binomial = "binomial", Pipeline = "pipeline");
algorithm_param!(ALLREDUCE_ALG, "coll_allreduce_algorithm", "MPI_Allreduce", AllreduceAlg:
    RecDbl = "recursive_doubling", Ring = "ring", Rabenseifner = "rabenseifner",
    ReduceBcast = "reduce_bcast");
algorithm_param!(GATHER_ALG, "coll_gather_algorithm", "MPI_Gather", GatherAlg:
    Linear = "linear", Binomial = "binomial");
algorithm_param!(SCATTER_ALG, "coll_scatter_algorithm", "MPI_Scatter", ScatterAlg:
    Linear = "linear", Binomial = "binomial");
algorithm_param!(ALLGATHER_ALG, "coll_allgather_algorithm", "MPI_Allgather", AllgatherAlg:
    RecDbl = "recursive_doubling", Bruck = "bruck", Ring = "ring", Linear = "linear");
algorithm_param!(ALLGATHERV_ALG, "coll_allgatherv_algorithm", "MPI_Allgatherv", AllgathervAlg:
    Ring = "ring", Linear = "linear");
algorithm_param!(ALLTOALL_ALG, "coll_alltoall_algorithm", "MPI_Alltoall", AlltoallAlg:
    Pairwise = "pairwise", Linear = "linear", Bruck = "bruck");
algorithm_param!(ALLTOALLV_ALG, "coll_alltoallv_algorithm", "MPI_Alltoallv and MPI_Alltoallw",
    AlltoallvAlg: Pairwise = "pairwise", Linear = "linear");
algorithm_param!(REDUCE_SCATTER_ALG, "coll_reduce_scatter_algorithm",
    "MPI_Reduce_scatter and MPI_Reduce_scatter_block", ReduceScatterAlg:
    Ring = "ring", Halving = "recursive_halving", ReduceScatter = "reduce_scatter");
algorithm_param!(SCAN_ALG, "coll_scan_algorithm", "MPI_Scan and MPI_Exscan", ScanAlg:
    RecDbl = "recursive_doubling", Linear = "linear");

/// The algorithm parameters with their algorithms' names (numbered from 1, 0 being `auto`):
/// the collectives read them at every call, so they may change after init (the same way at
/// every process: every process must choose the same algorithm).
pub static ALGORITHMS: [(&ParamDef, &[&str]); 12] = [
    (&BARRIER_ALG, BarrierAlg::NAMES),
    (&BCAST_ALG, BcastAlg::NAMES),
    (&REDUCE_ALG, ReduceAlg::NAMES),
    (&ALLREDUCE_ALG, AllreduceAlg::NAMES),
    (&GATHER_ALG, GatherAlg::NAMES),
    (&SCATTER_ALG, ScatterAlg::NAMES),
    (&ALLGATHER_ALG, AllgatherAlg::NAMES),
    (&ALLGATHERV_ALG, AllgathervAlg::NAMES),
    (&ALLTOALL_ALG, AlltoallAlg::NAMES),
    (&ALLTOALLV_ALG, AlltoallvAlg::NAMES),
    (&REDUCE_SCATTER_ALG, ReduceScatterAlg::NAMES),
    (&SCAN_ALG, ScanAlg::NAMES),
];

/// Parameters of the collectives.
pub static PARAMS: [&ParamDef; 21] = [
    &SEGMENT_BYTES,
    &PIPELINE_BYTES,
    &SCRATCH_BYTES,
    &MAX_ACTIVE,
    &MAX_PERSISTENT,
    &MAX_USER_OPS,
    &BARRIER_ALG,
    &BCAST_ALG,
    &REDUCE_ALG,
    &ALLREDUCE_ALG,
    &GATHER_ALG,
    &SCATTER_ALG,
    &ALLGATHER_ALG,
    &ALLGATHERV_ALG,
    &ALLTOALL_ALG,
    &ALLTOALLV_ALG,
    &REDUCE_SCATTER_ALG,
    &SCAN_ALG,
    &hier::HIER,
    &sm::SM,
    &sm::CONTEXTS,
];

/// Bytes of a reduction segment (a multiple of 64).
pub fn scratch_len(params: &Params) -> usize {
    params.usize(&SEGMENT_BYTES) & !63
}

/// The algorithms the parameters force (or `Auto`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tuning {
    barrier: BarrierAlg,
    bcast: BcastAlg,
    reduce: ReduceAlg,
    allreduce: AllreduceAlg,
    gather: GatherAlg,
    scatter: ScatterAlg,
    allgather: AllgatherAlg,
    allgatherv: AllgathervAlg,
    alltoall: AlltoallAlg,
    alltoallv: AlltoallvAlg,
    reduce_scatter: ReduceScatterAlg,
    scan: ScanAlg,
    segment: usize,
    pipeline: usize,
}

fn parse<T>(params: &Params, def: &'static ParamDef, f: fn(&str) -> Option<T>) -> Result<T> {
    // The description lists the algorithms by name.
    f(params.str(def)).ok_or(def.refused_with(Allowed::Text(def.description)))
}

impl Tuning {
    /// Most bytes an algorithm that stages whole messages in scratch (binomial gather and
    /// scatter, Bruck's all-to-all) may stage; past it, even when forced, they give way to
    /// their linear or pairwise counterparts (the same decision at every rank).
    fn staging(&self) -> usize {
        4 * self.segment
    }

    fn new(params: &Params) -> Result<Tuning> {
        Ok(Tuning {
            barrier: parse(params, &BARRIER_ALG, BarrierAlg::parse)?,
            bcast: parse(params, &BCAST_ALG, BcastAlg::parse)?,
            reduce: parse(params, &REDUCE_ALG, ReduceAlg::parse)?,
            allreduce: parse(params, &ALLREDUCE_ALG, AllreduceAlg::parse)?,
            gather: parse(params, &GATHER_ALG, GatherAlg::parse)?,
            scatter: parse(params, &SCATTER_ALG, ScatterAlg::parse)?,
            allgather: parse(params, &ALLGATHER_ALG, AllgatherAlg::parse)?,
            allgatherv: parse(params, &ALLGATHERV_ALG, AllgathervAlg::parse)?,
            alltoall: parse(params, &ALLTOALL_ALG, AlltoallAlg::parse)?,
            alltoallv: parse(params, &ALLTOALLV_ALG, AlltoallvAlg::parse)?,
            reduce_scatter: parse(params, &REDUCE_SCATTER_ALG, ReduceScatterAlg::parse)?,
            scan: parse(params, &SCAN_ALG, ScanAlg::parse)?,
            segment: scratch_len(params),
            pipeline: params.usize(&PIPELINE_BYTES),
        })
    }
}

/// The pool of non-blocking collectives: small at init, growing up to `coll_max_active`.
pub(crate) fn active_capacity(params: &Params) -> Capacity {
    Capacity::growing(ACTIVE_INITIAL, params.u32(&MAX_ACTIVE))
}

/// Scratch is handed out in units of this many bytes (so every buffer is 64-byte aligned).
const GRANULE: usize = 64;

/// The collectives' state: non-blocking collectives in flight, scratch, user operations.
pub struct CollState {
    pool: Pool<Coll>,
    /// The calls of persistent collective requests, one per request (see [`Colls::persist`]).
    #[cfg_attr(not(feature = "capi"), allow(dead_code))] // made by the C API only
    persistent: Pool<Persisted>,
    active: u32,
    scratch: *mut u8,
    scratch_len: usize,
    ranges: Ranges,
    blocking: *mut u8,
    blocking_len: usize,
    /// A blocking collective is using the blocking region (another thread's blocking
    /// collective meanwhile takes pool scratch instead).
    blocking_busy: bool,
    user_ops: crate::array::Array<Option<UserOp>>,
    /// Where persistent collectives' array copies come from.
    #[cfg_attr(not(feature = "capi"), allow(dead_code))] // made by the C API only
    account: Option<&'static crate::memory::Memory>,
    tune: Tuning,
    hier: hier::HierState,
    sm: sm::SmState,
}

// SAFETY: the scratch pointers are the engine's own memory (carved from its arena at init); the
// engine is used by one thread at a time.
unsafe impl Send for CollState {}

impl CollState {
    /// Takes the algorithm parameters anew from `params` (after one changed at run time);
    /// collectives planned from now on follow them. Nothing changes on an error.
    pub(crate) fn retune(&mut self, params: &Params) -> Result<()> {
        self.tune = Tuning::new(params)?;
        Ok(())
    }

    fn sizes(params: &Params) -> (usize, usize) {
        let pool = params.usize(&SCRATCH_BYTES).next_multiple_of(GRANULE);
        (pool, 4 * scratch_len(params))
    }

    /// Arena bytes the collectives need.
    pub fn size(params: &Params, sizer: &mut Sizer) {
        let (pool, blocking) = CollState::sizes(params);
        Pool::<Coll>::size(sizer, active_capacity(params));
        Pool::<Persisted>::size(sizer, persistent_capacity(params));
        sizer
            .slice::<MaybeUninit<u64>>((pool + blocking) / 8)
            .slice::<Option<UserOp>>(USER_OPS_INITIAL.min(params.usize(&MAX_USER_OPS)));
        hier::HierState::size(params, sizer);
        sm::SmState::size(params, sizer);
    }

    /// The collectives' state, carved from `arena`.
    pub fn new(params: &Params, arena: &mut Arena) -> Result<CollState> {
        let tune = Tuning::new(params)?;
        let (pool, blocking) = CollState::sizes(params);
        let colls = Pool::new(arena, active_capacity(params))?;
        let mem = arena.slice((pool + blocking) / 8, |_| MaybeUninit::<u64>::uninit())?;
        let base = mem.as_mut_ptr().cast::<u8>();
        Ok(CollState {
            pool: colls,
            persistent: Pool::new(arena, persistent_capacity(params))?,
            active: 0,
            scratch: base,
            scratch_len: pool,
            ranges: Ranges::new((pool / GRANULE) as u32),
            blocking: base.wrapping_add(pool),
            blocking_len: blocking,
            blocking_busy: false,
            user_ops: crate::array::Array::new(
                arena,
                USER_OPS_INITIAL,
                params.usize(&MAX_USER_OPS),
                |_| None,
            )?,
            account: arena.account(),
            tune,
            hier: hier::HierState::new(params, arena)?,
            sm: sm::SmState::new(params, arena)?,
        })
    }

    /// Non-blocking collectives in flight.
    pub fn active(&self) -> u32 {
        self.active
    }
}

/// Blocking, or non-blocking with a request of this Rust API scope (0 for none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Returns when the operation has completed locally.
    Blocking,
    /// Returns a request at once.
    NonBlocking {
        /// The scope the request belongs to.
        scope: u32,
    },
}

/// `count` instances of `dt` at `ptr`.
#[derive(Clone, Copy, Debug)]
pub struct Buf {
    /// Start of the buffer.
    pub ptr: *mut u8,
    /// Instances.
    pub count: u64,
    /// Their type.
    pub dt: Datatype,
}

impl Buf {
    /// The buffer as the executor's span.
    pub(crate) fn span(&self) -> exec::Span {
        exec::Span::new(self.ptr, self.count, self.dt)
    }
}

/// Blocks of `counts[i]` instances of `dt` at `ptr + displs[i] * extent(dt)`, one per rank.
#[derive(Clone, Copy, Debug)]
pub struct VBuf {
    /// Start of the buffer.
    pub ptr: *mut u8,
    /// Instances per rank (an array of the communicator's size).
    pub counts: Ints,
    /// Displacements in extents (an array of the communicator's size).
    pub displs: Ints,
    /// The type.
    pub dt: Datatype,
}

/// Blocks of `counts[i]` instances of `map(types[i])` at `ptr + displs[i]` bytes, one per rank.
#[derive(Clone, Copy, Debug)]
pub struct WBuf {
    /// Start of the buffer.
    pub ptr: *mut u8,
    /// Instances per rank.
    pub counts: Ints,
    /// Displacements in bytes.
    pub displs: Ints,
    /// The types, as the caller names them.
    pub types: *const i32,
    /// The type a name stands for (every name is checked first with `check`).
    pub map: fn(i32) -> Datatype,
    /// Whether a name is a valid, committed type (checked for every rank before data moves).
    pub check: fn(&TypeTable, i32) -> Result<Datatype>,
}

/// The blocks of one side of a neighbourhood collective, block `i` for neighbour `i`.
#[derive(Clone, Copy, Debug)]
pub enum NBlocks {
    /// The one buffer for every neighbour (`MPI_Neighbor_allgather(v)`'s send side).
    Same(Buf),
    /// Consecutive blocks of the buffer's count each (`MPI_Neighbor_alltoall`).
    Each(Buf),
    /// Blocks at displacements in extents (the v-forms).
    V(VBuf),
    /// Blocks of their own types at byte displacements (the w-form).
    W(WBuf),
}

/// A collective call. Buffers are `None` for `MPI_IN_PLACE`; arguments significant only at the
/// root are ignored elsewhere.
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub enum Call {
    Barrier,
    Bcast {
        buf: Buf,
        root: i32,
    },
    Gather {
        send: Option<Buf>,
        recv: Buf,
        root: i32,
    },
    Gatherv {
        send: Option<Buf>,
        recv: VBuf,
        root: i32,
    },
    Scatter {
        send: Buf,
        recv: Option<Buf>,
        root: i32,
    },
    Scatterv {
        send: VBuf,
        recv: Option<Buf>,
        root: i32,
    },
    Allgather {
        send: Option<Buf>,
        recv: Buf,
    },
    Allgatherv {
        send: Option<Buf>,
        recv: VBuf,
    },
    Alltoall {
        send: Option<Buf>,
        recv: Buf,
    },
    Alltoallv {
        send: Option<VBuf>,
        recv: VBuf,
    },
    Alltoallw {
        send: Option<WBuf>,
        recv: WBuf,
    },
    /// `recv` is significant at the root only.
    Reduce {
        send: Option<*const u8>,
        recv: *mut u8,
        count: u64,
        dt: Datatype,
        op: Op,
        root: i32,
    },
    Allreduce {
        send: Option<*const u8>,
        recv: *mut u8,
        count: u64,
        dt: Datatype,
        op: Op,
    },
    /// Every rank gets `count` instances.
    ReduceScatterBlock {
        send: Option<*const u8>,
        recv: *mut u8,
        count: u64,
        dt: Datatype,
        op: Op,
    },
    /// Rank `i` gets `counts[i]` instances.
    ReduceScatter {
        send: Option<*const u8>,
        recv: *mut u8,
        counts: Ints,
        dt: Datatype,
        op: Op,
    },
    Scan {
        send: Option<*const u8>,
        recv: *mut u8,
        count: u64,
        dt: Datatype,
        op: Op,
    },
    Exscan {
        send: Option<*const u8>,
        recv: *mut u8,
        count: u64,
        dt: Datatype,
        op: Op,
    },
    /// A neighbourhood collective on the communicator's topology.
    Neighbor {
        send: NBlocks,
        recv: NBlocks,
    },
}

/// A persistent collective's call, kept for every start.
#[cfg_attr(not(feature = "capi"), allow(dead_code))] // made by the C API only
#[derive(Clone, Copy, Debug)]
struct Persisted {
    comm: CommId,
    call: Call,
    /// The call's own copies of its count, displacement and type arrays, if it has any.
    kept: Option<Kept>,
}

/// A grant holding a persistent collective's copies of the arrays it reads at every start:
/// MPI 4.1 lets the caller reuse them once the `_init` call returns (mpi4py frees the ones it
/// converted), as Open MPI and MPICH allow.
#[cfg_attr(not(feature = "capi"), allow(dead_code))] // made by the C API only
#[derive(Clone, Copy, Debug)]
struct Kept {
    ptr: *mut u8,
    len: usize,
}

/// Calls `each` on every count, displacement and type array `call` reads, with its length:
/// `peers` for per-rank arrays (the remote group's size on an intercommunicator), `local` for a
/// reduce-scatter's counts, the topology's in- and out-degree for a neighbourhood collective's
/// receive and send sides. Arrays the call does not read were made NULL by the C API.
#[cfg_attr(not(feature = "capi"), allow(dead_code))] // made by the C API only
fn call_arrays(
    call: &mut Call,
    peers: usize,
    local: usize,
    degrees: (usize, usize),
    each: &mut dyn FnMut(Array<'_>, usize),
) {
    fn v(b: &mut VBuf, n: usize, each: &mut dyn FnMut(Array<'_>, usize)) {
        each(Array::Ints(&mut b.counts), n);
        each(Array::Ints(&mut b.displs), n);
    }
    fn w(b: &mut WBuf, n: usize, each: &mut dyn FnMut(Array<'_>, usize)) {
        each(Array::Ints(&mut b.counts), n);
        each(Array::Ints(&mut b.displs), n);
        each(Array::Types(&mut b.types), n);
    }
    fn nb(b: &mut NBlocks, n: usize, each: &mut dyn FnMut(Array<'_>, usize)) {
        match b {
            NBlocks::V(b) => v(b, n, each),
            NBlocks::W(b) => w(b, n, each),
            NBlocks::Same(_) | NBlocks::Each(_) => {}
        }
    }
    match call {
        Call::Gatherv { recv, .. } | Call::Allgatherv { recv, .. } => v(recv, peers, each),
        Call::Scatterv { send, .. } => v(send, peers, each),
        Call::Alltoallv { send, recv } => {
            if let Some(s) = send {
                v(s, peers, each);
            }
            v(recv, peers, each);
        }
        Call::Alltoallw { send, recv } => {
            if let Some(s) = send {
                w(s, peers, each);
            }
            w(recv, peers, each);
        }
        Call::ReduceScatter { counts, .. } => each(Array::Ints(counts), local),
        Call::Neighbor { send, recv } => {
            nb(send, degrees.1, each);
            nb(recv, degrees.0, each);
        }
        _ => {}
    }
}

/// One array of a call, for [`call_arrays`].
#[cfg_attr(not(feature = "capi"), allow(dead_code))] // made by the C API only
enum Array<'a> {
    Ints(&'a mut Ints),
    Types(&'a mut *const i32),
}

impl Array<'_> {
    fn bytes(&self, n: usize) -> usize {
        match self {
            Array::Ints(a) if !a.is_null() => a.bytes(n),
            Array::Types(t) if !t.is_null() => n * size_of::<i32>(),
            _ => 0,
        }
        .next_multiple_of(8)
    }

    /// Copies the first `n` elements to `dst` and points the call at the copy.
    ///
    /// # Safety
    /// The array has `n` elements; `dst` is 8-byte aligned and writable for
    /// [`Array::bytes`]`(n)` bytes that nothing else uses.
    unsafe fn move_to(self, dst: *mut u8, n: usize) {
        match self {
            // SAFETY: the caller's contract.
            Array::Ints(a) if !a.is_null() => *a = unsafe { a.copy_to(dst, n) },
            Array::Types(t) if !t.is_null() => {
                // SAFETY: the caller's contract.
                unsafe { core::ptr::copy_nonoverlapping(*t, dst.cast::<i32>(), n) };
                *t = dst.cast_const().cast();
            }
            _ => {}
        }
    }
}

/// The datatypes a call names directly (an all-to-all-w's types are the user's arrays and are
/// not retained: MPI asks that they stay valid for a persistent request's life).
#[cfg_attr(not(feature = "capi"), allow(dead_code))] // made by the C API only
fn call_types(call: &Call) -> [Option<Datatype>; 2] {
    let b = |b: &Buf| Some(b.dt);
    let ob = |b: &Option<Buf>| b.as_ref().map(|b| b.dt);
    match call {
        Call::Barrier | Call::Alltoallw { .. } => [None, None],
        Call::Bcast { buf, .. } => [b(buf), None],
        Call::Gather { send, recv, .. }
        | Call::Allgather { send, recv }
        | Call::Alltoall { send, recv } => [ob(send), b(recv)],
        Call::Scatter { send, recv, .. } => [b(send), ob(recv)],
        Call::Gatherv { send, recv, .. } | Call::Allgatherv { send, recv } => {
            [ob(send), Some(recv.dt)]
        }
        Call::Scatterv { send, recv, .. } => [Some(send.dt), ob(recv)],
        Call::Alltoallv { send, recv } => [send.as_ref().map(|s| s.dt), Some(recv.dt)],
        Call::Reduce { dt, .. }
        | Call::Allreduce { dt, .. }
        | Call::ReduceScatterBlock { dt, .. }
        | Call::ReduceScatter { dt, .. }
        | Call::Scan { dt, .. }
        | Call::Exscan { dt, .. } => [Some(*dt), None],
        Call::Neighbor { send, recv } => {
            let t = |b: &NBlocks| match b {
                NBlocks::Same(b) | NBlocks::Each(b) => Some(b.dt),
                NBlocks::V(v) => Some(v.dt),
                NBlocks::W(_) => None,
            };
            [t(send), t(recv)]
        }
    }
}

const TAG_BASE: i32 = -(1 << 20);

/// The tag of a communicator's collective number `seq`.
fn coll_tag(seq: u32) -> i32 {
    TAG_BASE - (seq & 0x3fff_ffff) as i32
}

fn root_error(root: i32, size: u32) -> Error {
    Error::new(
        ErrorClass::Root,
        Reason::RankOutOfRange { rank: root, size },
    )
}

fn check_root(root: i32, size: u32) -> Result<u32> {
    if root < 0 || root as u32 >= size {
        return Err(root_error(root, size));
    }
    Ok(root as u32)
}

/// The predefined type every element of derived type `d` is (markers aside), if there is one.
fn base_type(types: &TypeTable, d: Datatype, depth: u32) -> Option<Datatype> {
    if d.is_predefined() {
        return Some(d);
    }
    if depth > 32 {
        return None;
    }
    let mut found = None;
    for t in types.old_types(d).ok()? {
        if t == Datatype::LB || t == Datatype::UB {
            continue;
        }
        let b = base_type(types, t, depth + 1)?;
        match found {
            None => found = Some(b),
            Some(f) if f == b => {}
            _ => return None,
        }
    }
    found
}

/// Extent of a type.
fn extent(types: &TypeTable, dt: Datatype) -> Result<isize> {
    Ok(types.check_committed(dt)?.extent)
}

/// Packed bytes of `b`.
fn packed(types: &TypeTable, b: &Buf) -> u64 {
    b.count * exec::type_size(types, b.dt)
}

fn uniform(types: &TypeTable, b: &Buf) -> Result<Blocks> {
    Ok(Blocks::Uniform {
        base: b.ptr,
        count: b.count,
        dt: b.dt,
        ext: extent(types, b.dt)?,
    })
}

/// Checks a v-buffer's counts (non-negative) and type; its blocks.
fn vblocks(types: &TypeTable, v: &VBuf, p: u32) -> Result<Blocks> {
    let ext = extent(types, v.dt)?;
    check_counts(v.counts, p)?;
    Ok(Blocks::V {
        base: v.ptr,
        counts: v.counts,
        displs: v.displs,
        dt: v.dt,
        ext,
    })
}

fn check_counts(counts: Ints, p: u32) -> Result<()> {
    if counts.is_null() {
        return Err(Error::bad_arg("array of counts is NULL"));
    }
    for i in 0..p {
        // SAFETY: MPI requires an entry per rank of the communicator.
        let c = unsafe { counts.get(i as usize) };
        if c < 0 {
            return Err(Error::new(
                ErrorClass::Count,
                Reason::NegativeCount { count: c },
            ));
        }
    }
    Ok(())
}

fn wblocks(types: &TypeTable, w: &WBuf, p: u32) -> Result<Blocks> {
    check_counts(w.counts, p)?;
    if w.types.is_null() || w.displs.is_null() {
        return Err(Error::bad_arg("array of types or displacements is NULL"));
    }
    for i in 0..p {
        // SAFETY: MPI requires an entry per rank.
        (w.check)(types, unsafe { *w.types.add(i as usize) })?;
    }
    Ok(Blocks::W {
        base: w.ptr,
        counts: w.counts,
        displs: w.displs,
        types: w.types,
        map: w.map,
    })
}

/// Bytes of scratch that hold the data of `s` (from its true lower bound).
fn span_bytes(types: &TypeTable, s: &Span) -> usize {
    match types.info(s.dt) {
        Ok(i) if s.count > 0 => {
            (s.count as usize - 1) * i.extent.unsigned_abs() + i.true_extent.max(0) as usize
        }
        _ => 0,
    }
}

/// A collective planned: its algorithm, scratch and (for reductions) segment loop.
struct Planned {
    alg: Alg,
    red: Option<Red>,
    segs: Option<Segs>,
    scratch: Scratch,
    holds: [Option<Datatype>; 3],
}

impl Planned {
    fn new(alg: Alg) -> Planned {
        Planned {
            alg,
            red: None,
            segs: None,
            scratch: Scratch::None,
            holds: [None; 3],
        }
    }
}

/// The collectives at work: their state, with point-to-point borrowed.
pub(crate) struct Colls<'a> {
    pub(crate) p2p: &'a mut P2p,
    pub(crate) coll: &'a mut CollState,
}

impl Colls<'_> {
    fn check_comm(&self, comm: CommId) -> Result<&crate::comm::Comm> {
        self.p2p.comm(comm)
    }

    fn comm_homogeneous(&self, comm: CommId) -> Result<bool> {
        self.p2p.comm_homogeneous(comm)
    }

    fn grp(&self, comm: CommId) -> Result<Grp> {
        let c = self.check_comm(comm)?;
        Ok(Grp {
            rank: c.rank,
            size: c.size(),
        })
    }

    /// Scratch of `need` bytes: the blocking region if it fits and no other blocking
    /// collective (another thread's) has it, else the pool.
    fn grab(&mut self, need: usize, mode: Mode) -> Result<(Scratch, *mut u8)> {
        let s = &mut self.coll;
        if need == 0 {
            return Ok((Scratch::None, core::ptr::NonNull::dangling().as_ptr()));
        }
        if mode == Mode::Blocking && need <= s.blocking_len && !s.blocking_busy {
            s.blocking_busy = true;
            return Ok((Scratch::Blocking, s.blocking));
        }
        let units = need.div_ceil(GRANULE);
        let start = u32::try_from(units)
            .ok()
            .and_then(|u| s.ranges.alloc(u).map(|st| (st, u)));
        match start {
            Some((st, u)) => Ok((
                Scratch::Pool { start: st, len: u },
                s.scratch.wrapping_add(st as usize * GRANULE),
            )),
            None => Err(Error::exhausted(
                "collective scratch memory (bytes)",
                s.scratch_len.min(u32::MAX as usize) as u32,
                SCRATCH_BYTES.name,
            )),
        }
    }

    fn ungrab(&mut self, s: Scratch) {
        match s {
            Scratch::Pool { start, len } => self.coll.ranges.release(start, len),
            Scratch::Blocking => self.coll.blocking_busy = false,
            Scratch::None => {}
        }
    }

    /// Starts non-blocking collective `call` on `comm` (`MPI_Ibcast`, ...); its request. `tag`
    /// is the one the caller reserved for it, or `None` for the communicator's next.
    ///
    /// # Safety
    /// As for [`collective`].
    pub(crate) unsafe fn start(
        &mut self,
        comm: CommId,
        call: Call,
        scope: u32,
        tag: Option<i32>,
    ) -> Result<ReqId> {
        let mode = Mode::NonBlocking { scope };
        let c = self.check_comm(comm)?;
        if c.is_inter() {
            let tags = tag.map(|t| (t, t));
            // SAFETY: the caller's contract.
            let (c, holds) = unsafe { self.inter_plan(comm, call, mode, tags)? };
            return self.launch(c, holds, scope);
        }
        let g = Grp {
            rank: c.rank,
            size: c.size(),
        };
        // SAFETY: the caller's contract.
        if let Some(req) = unsafe { self.hier_start(comm, &call, scope)? } {
            return Ok(req);
        }
        if !self.coll.pool.reserve() {
            return Err(self
                .coll
                .pool
                .exhausted("non-blocking collectives in flight", MAX_ACTIVE.name));
        }
        // SAFETY: the caller's contract.
        let planned = unsafe { self.plan(comm, g, call, mode)? };
        let tag = self.coll_tag_for(comm, tag);
        let mut c = Coll::new(comm, tag, planned.alg);
        c.red = planned.red;
        c.segs = planned.segs;
        c.scratch = planned.scratch;
        self.launch(c, planned.holds, scope)
    }

    /// Makes persistent collective request of `call` on `comm` (`MPI_Bcast_init`, ...): an
    /// inactive request whose every `MPI_Start` begins `call` as its non-blocking form would
    /// (so each start takes the communicator's next collective number, as MPI's rule that all
    /// members start their persistent collectives in one order lets it). The call's datatypes
    /// are retained until the request is freed ([`Colls::unpersist`]).
    ///
    /// # Safety
    /// As for [`collective`], for every start: the buffers and arrays stay valid until the
    /// request is freed.
    #[cfg_attr(not(feature = "capi"), allow(dead_code))] // made by the C API only
    pub(crate) unsafe fn persist(&mut self, comm: CommId, call: Call) -> Result<ReqId> {
        let c = self.check_comm(comm)?;
        let (peers, local) = (c.peers().size() as usize, c.size() as usize);
        let mut degrees = (0, 0);
        if let Call::Neighbor { .. } = call {
            crate::topo::neighbors(self.p2p, comm, |_, _| degrees.0 += 1, |_, _| degrees.1 += 1)?;
        }
        let mut call = call;
        // SAFETY: the caller's contract: the arrays have the lengths MPI gives them.
        let kept = unsafe { self.keep_arrays(&mut call, peers, local, degrees)? };
        let key = match self.coll.persistent.insert(Persisted { comm, call, kept }) {
            Ok(k) => k,
            Err(_) => {
                self.give_back(kept);
                return Err(self
                    .coll
                    .persistent
                    .exhausted("persistent collective requests", MAX_PERSISTENT.name));
            }
        };
        let kind = PersistentKind::Coll(CollInit { comm, call: key });
        match self.p2p.pml.requests_mut().persistent(kind) {
            Ok(id) => {
                for d in call_types(&call).into_iter().flatten() {
                    self.p2p.types.retain(d);
                }
                Ok(id)
            }
            Err(e) => {
                let kept = self.coll.persistent.remove(key).and_then(|p| p.kept);
                self.give_back(kept);
                Err(e)
            }
        }
    }

    /// Copies `call`'s arrays into one grant and points the call at the copies.
    ///
    /// # Safety
    /// Every array `call` names has the length [`call_arrays`] gives it.
    #[cfg_attr(not(feature = "capi"), allow(dead_code))] // made by the C API only
    unsafe fn keep_arrays(
        &mut self,
        call: &mut Call,
        peers: usize,
        local: usize,
        degrees: (usize, usize),
    ) -> Result<Option<Kept>> {
        let mut len = 0;
        call_arrays(call, peers, local, degrees, &mut |a, n| len += a.bytes(n));
        if len == 0 {
            return Ok(None);
        }
        const WHAT: &str = "persistent collectives' count and displacement arrays";
        // An engine without a memory account (a test's fixed arena) has no room to give.
        let mem =
            self.coll
                .account
                .ok_or(Error::exhausted(WHAT, 0, crate::memory::MEMORY_MAX.name))?;
        let region = mem.take(len).map_err(|why| mem.refused(WHAT, why))?;
        let ptr = region.as_mut_ptr().cast::<u8>();
        let mut at = 0;
        call_arrays(call, peers, local, degrees, &mut |a, n| {
            let b = a.bytes(n);
            // SAFETY: the caller's contract for the source; the grant (aligned to
            // `GRANT_ALIGN`) has `len` bytes, the sum of every array's rounded length, so each
            // copy lands 8-byte aligned in bytes of its own.
            unsafe { a.move_to(ptr.add(at), n) };
            at += b;
        });
        Ok(Some(Kept { ptr, len }))
    }

    fn give_back(&self, kept: Option<Kept>) {
        if let (Some(k), Some(mem)) = (kept, self.coll.account) {
            // SAFETY: `k` is exactly the region one `Memory::take` returned in `keep_arrays`,
            // and the request that pointed into it is gone.
            let region =
                unsafe { core::slice::from_raw_parts_mut(k.ptr.cast::<MaybeUninit<u8>>(), k.len) };
            mem.give_back(region);
        }
    }

    /// Begins one start of a persistent collective (`MPI_Start`): its operation's request.
    ///
    /// # Safety
    /// As for [`Colls::persist`].
    #[cfg_attr(not(feature = "capi"), allow(dead_code))] // made by the C API only
    pub(crate) unsafe fn start_persistent(&mut self, init: &CollInit) -> Result<ReqId> {
        let p = self
            .coll
            .persistent
            .get(init.call)
            .copied()
            .ok_or(Error::new(
                ErrorClass::Request,
                Reason::BadArgument {
                    what: "persistent collective request is stale",
                },
            ))?;
        // SAFETY: the caller's contract.
        unsafe { self.start(p.comm, p.call, 0, None) }
    }

    /// Lets go of a persistent collective's call and the datatypes it retained (the request
    /// itself is the request core's to free).
    #[cfg_attr(not(feature = "capi"), allow(dead_code))] // made by the C API only
    pub(crate) fn unpersist(&mut self, init: &CollInit) {
        if let Some(p) = self.coll.persistent.remove(init.call) {
            for d in call_types(&p.call).into_iter().flatten() {
                self.p2p.types.release(d);
            }
            self.give_back(p.kept);
        }
    }

    /// Plans a neighbourhood collective: the topology's neighbours as `(rank, slot)` pairs in
    /// scratch, in posting order. On a grid, a rank's sends go (lower, upper) and its receives
    /// (from upper, from lower) per dimension: the block sent downward is the one the lower
    /// neighbour takes from its upper side, so a peer that is both neighbours gets both blocks
    /// in the order they were sent.
    fn plan_neighbor(
        &mut self,
        comm: CommId,
        send: NBlocks,
        recv: NBlocks,
        mode: Mode,
    ) -> Result<Planned> {
        let mut ins: heapless::Vec<[u32; 2], MAX_ACTS> = heapless::Vec::new();
        let mut outs: heapless::Vec<[u32; 2], MAX_ACTS> = heapless::Vec::new();
        let (mut ni, mut no, mut over_in, mut over_out) = (0u32, 0u32, false, false);
        crate::topo::neighbors(
            self.p2p,
            comm,
            |r, _| {
                if r != crate::pml::request::PROC_NULL {
                    over_in |= ins.push([r as u32, ni]).is_err();
                }
                ni += 1;
            },
            |r, _| {
                if r != crate::pml::request::PROC_NULL {
                    over_out |= outs.push([r as u32, no]).is_err();
                }
                no += 1;
            },
        )?;
        if over_in || over_out || ins.len() + outs.len() > MAX_ACTS {
            return Err(Error::unsupported(
                "non-blocking and persistent neighbourhood collectives with more than 64 \
                 neighbours in all (the blocking forms take up to 256)",
            ));
        }
        if let Some((crate::topo::table::Shape::Cart { .. }, _)) =
            crate::topo::topology(self.p2p, comm)?
        {
            // Receives from (lower, upper) become (upper, lower) per dimension; a PROC_NULL
            // left out leaves no pair to swap.
            let mut k = 0;
            while k + 1 < ins.len() {
                if ins[k][1] / 2 == ins[k + 1][1] / 2 {
                    ins.swap(k, k + 1);
                    k += 2;
                } else {
                    k += 1;
                }
            }
        }
        let types = &self.p2p.types;
        let blocks = |b: &NBlocks, n: u32| -> Result<Blocks> {
            Ok(match b {
                NBlocks::Same(b) => Blocks::Uniform {
                    base: b.ptr,
                    count: b.count,
                    dt: b.dt,
                    ext: 0,
                },
                NBlocks::Each(b) => uniform(types, b)?,
                NBlocks::V(v) => vblocks(types, v, n)?,
                NBlocks::W(w) => wblocks(types, w, n)?,
            })
        };
        let (sb, rb) = (blocks(&send, no)?, blocks(&recv, ni)?);
        let pair = size_of::<[u32; 2]>();
        let (scratch, base) = self.grab((ins.len() + outs.len()) * pair, mode)?;
        let at = base.cast::<[u32; 2]>();
        // SAFETY: the scratch just taken holds every pair (64-byte aligned), ours until the
        // collective completes.
        unsafe {
            core::ptr::copy_nonoverlapping(ins.as_ptr(), at, ins.len());
            core::ptr::copy_nonoverlapping(outs.as_ptr(), at.add(ins.len()), outs.len());
        }
        let mut pl = Planned::new(Alg::Neighbor(alg::Neighbor {
            ins: at,
            ni: ins.len() as u32,
            outs: at.wrapping_add(ins.len()),
            no: outs.len() as u32,
            send: sb,
            recv: rb,
        }));
        pl.scratch = scratch;
        let [a, b] = call_types(&Call::Neighbor { send, recv });
        pl.holds = [a, b, None];
        Ok(pl)
    }

    /// Hands collective `c` to the engine's progress with a request of `scope`, holding
    /// datatypes `holds` until it completes.
    fn launch(&mut self, mut c: Coll, holds: [Option<Datatype>; 3], scope: u32) -> Result<ReqId> {
        let req = match self.p2p.pml.requests_mut().pending(scope) {
            Ok(r) => r,
            Err(e) => {
                c.scratches().for_each(|s| self.ungrab(s));
                return Err(e);
            }
        };
        c.req = Some(req);
        for (h, d) in c.holds.iter_mut().zip(holds) {
            *h = d.and_then(|d| self.p2p.types.hold(d));
        }
        let key = match self.coll.pool.insert(c) {
            Ok(key) => key,
            Err(c) => {
                c.scratches().for_each(|s| self.ungrab(s));
                let _ = self.p2p.pml.requests_mut().release(req);
                return Err(Error::exhausted(
                    "non-blocking collectives in flight",
                    self.coll.pool.capacity(),
                    MAX_ACTIVE.name,
                ));
            }
        };
        self.coll.active += 1;
        self.advance_one(key.index);
        Ok(req)
    }

    /// Posts a receive into `sp` from `from`.
    ///
    /// # Safety
    /// `sp` stays writable and otherwise unused until the receive completes.
    #[inline(always)]
    unsafe fn irecv_span(&mut self, sp: Span, from: u32, tag: i32, comm: CommId) -> Result<ReqId> {
        let sel = self.p2p.sel(comm, Source::Rank(from), tag)?;
        if !sp.dt.is_contiguous() {
            // SAFETY: the caller's contract.
            let conv = unsafe { Unpacker::new(sp.ptr, sp.count, sp.dt, &self.p2p.types)? };
            return self.p2p.irecv(&sel, conv, 0);
        }
        // SAFETY: the caller's contract.
        let data = unsafe { Elements::new(sp.ptr, sp.count as usize, sp.dt) };
        self.p2p.irecv(&sel, data, 0)
    }

    /// Sends `sp` to `to`: at once if the PML can, else by a request, returned.
    ///
    /// # Safety
    /// `sp` stays readable and unchanged until the send completes.
    #[inline(always)]
    unsafe fn isend_span(
        &mut self,
        sp: Span,
        to: u32,
        tag: i32,
        comm: CommId,
    ) -> Result<Option<ReqId>> {
        let d = self.p2p.dest(comm, to)?;
        if sp.dt.is_contiguous() {
            // SAFETY: the caller's contract.
            let data = unsafe { Elements::new(sp.ptr, sp.count as usize, sp.dt) };
            self.p2p.send(&d, tag, data, SendMode::Standard, 0)
        } else {
            // SAFETY: the caller's contract.
            let conv = unsafe { Packer::new(sp.ptr, sp.count, sp.dt, &self.p2p.types)? };
            self.p2p.send(&d, tag, conv, SendMode::Standard, 0)
        }
    }

    /// The tag of the next collective on `comm`: `tag` when the caller reserved one.
    fn coll_tag_for(&mut self, comm: CommId, tag: Option<i32>) -> i32 {
        match tag {
            Some(t) => t,
            None => coll_tag(self.p2p.comms.next_coll_seq(comm)),
        }
    }

    /// Advances non-blocking collective in slot `i`; finishes it if it is done. True if it was.
    fn advance_one(&mut self, i: u32) -> bool {
        let Colls { p2p, coll } = self;
        let Some(c) = coll.pool.remove_at_if(i, |c| c.advance(p2p)) else {
            return false;
        };
        coll.active -= 1;
        for sc in c.scratches() {
            if let Scratch::Pool { start, len } = sc {
                coll.ranges.release(start, len);
            }
        }
        for h in c.holds.iter().flatten() {
            h.fetch_sub(1, core::sync::atomic::Ordering::Relaxed);
        }
        if let Some(req) = c.req {
            p2p.pml.requests_mut().finish(
                req,
                Status {
                    error: c.err,
                    ..Status::EMPTY
                },
            );
        }
        true
    }

    /// Whether a non-blocking collective in flight still uses `comm`: freeing it then waits
    /// (messages of the collective's later steps must still find it).
    pub(crate) fn coll_uses(&self, comm: CommId) -> bool {
        self.coll.active > 0
            && (0..self.coll.pool.capacity()).any(|i| {
                self.coll.pool.at(i).is_some_and(|c| {
                    c.comm == comm || c.phases.iter().flatten().any(|p| p.comm == comm)
                })
            })
    }

    /// Advances the non-blocking collectives in flight; returns how many finished. With none
    /// in flight (most calls of most programs), one inline test.
    #[inline(always)]
    pub(crate) fn coll_progress(&mut self) -> usize {
        if self.coll.active == 0 && self.coll.hier.idle() {
            return 0;
        }
        self.coll_progress_busy()
    }

    #[inline(never)]
    fn coll_progress_busy(&mut self) -> usize {
        if self.coll.active == 0 {
            return self.hier_progress();
        }
        let mut finished = 0;
        let mut seen = 0;
        let total = self.coll.active;
        for i in 0..self.coll.pool.capacity() {
            if seen == total {
                break;
            }
            if self.coll.pool.at_mut(i).is_none() {
                continue;
            }
            seen += 1;
            finished += self.advance_one(i) as usize;
        }
        finished + self.hier_progress()
    }

    /// Plans a small blocking broadcast, reduce or allreduce of a predefined type with a
    /// predefined operation without the general machinery: the same algorithm [`Engine::plan`]
    /// chooses (so the messages are the same at every rank, whichever way each planned), in one
    /// segment, with scratch from the blocking region. `None` when the call is not such a one.
    fn fast_plan(&mut self, g: Grp, call: &Call) -> Option<Planned> {
        if self.coll.blocking_busy {
            // Another thread's blocking collective has the region: plan the general way.
            return None;
        }
        let tune = &self.coll.tune;
        let p = g.size;
        let reduction = small_reduction;
        let region = self.coll.blocking;
        let unit = |n: u64, red: &Red| red.bytes(n).next_multiple_of(GRANULE);
        let alg = match *call {
            Call::Barrier => return Some(Planned::new(barrier_alg(tune.barrier, g))),
            Call::Bcast { buf, root } => {
                let bytes = buf.count * buf.dt.size() as u64;
                let binomial = match tune.bcast {
                    BcastAlg::Binomial => true,
                    BcastAlg::Auto => bytes < 128 << 10 || p <= 2,
                    _ => false,
                };
                if !buf.dt.is_contiguous() || !binomial || root < 0 || root as u32 >= p {
                    return None;
                }
                if bytes == 0 || p == 1 {
                    return Some(Planned::new(Alg::Nothing));
                }
                let span = Span::new(buf.ptr, buf.count, buf.dt);
                (
                    Alg::BcastBinomial(BcastBinomial {
                        g,
                        root: root as u32,
                        buf: span,
                    }),
                    None,
                )
            }
            Call::Allreduce {
                send,
                recv,
                count,
                dt,
                op,
            } => {
                let red = reduction(dt, op, count)?;
                let bytes = count * red.size;
                let recdbl = match tune.allreduce {
                    AllreduceAlg::RecDbl => true,
                    AllreduceAlg::Auto => bytes <= 4096 || count < p as u64,
                    _ => false,
                };
                if !recdbl {
                    return None;
                }
                (
                    Alg::AllreduceRecDbl(alg::AllreduceRecDbl {
                        g,
                        red,
                        fold: Fold::new(p),
                        src: send.unwrap_or(recv) as *mut u8,
                        out: recv,
                        tmp: region,
                        n: count,
                        swapped: false,
                    }),
                    Some(red),
                )
            }
            Call::Reduce {
                send,
                recv,
                count,
                dt,
                op,
                root,
            } => {
                let red = reduction(dt, op, count)?;
                if root < 0
                    || root as u32 >= p
                    || !matches!(tune.reduce, ReduceAlg::Auto | ReduceAlg::Binomial)
                {
                    return None;
                }
                let root = root as u32;
                let at_root = g.rank == root;
                let src = match (send, at_root) {
                    (Some(s), _) => s as *mut u8,
                    (None, true) => recv,
                    (None, false) => return None,
                };
                let s1 = region.wrapping_add(unit(count, &red));
                (
                    Alg::ReduceBinomial(alg::ReduceBinomial::new(
                        g,
                        red,
                        root,
                        src,
                        at_root.then_some(recv),
                        None,
                        region,
                        s1,
                        count,
                    )),
                    Some(red),
                )
            }
            _ => return None,
        };
        let mut pl = Planned::new(alg.0);
        pl.red = alg.1;
        pl.scratch = Scratch::Blocking;
        self.coll.blocking_busy = true;
        Some(pl)
    }

    /// Plans `call`: checks its arguments, chooses its algorithm, takes its scratch.
    ///
    /// # Safety
    /// As for [`Engine::collective`].
    unsafe fn plan(&mut self, comm: CommId, g: Grp, call: Call, mode: Mode) -> Result<Planned> {
        let (p, r) = (g.size, g.rank);
        let tune = self.coll.tune;
        let types = &self.p2p.types;
        Ok(match call {
            Call::Neighbor { send, recv } => return self.plan_neighbor(comm, send, recv, mode),
            Call::Barrier => Planned::new(barrier_alg(tune.barrier, g)),
            Call::Bcast { buf, root } => {
                let root = check_root(root, p)?;
                extent(types, buf.dt)?;
                let bytes = packed(types, &buf);
                let dense = exec::dense(types, buf.dt).map(|at| buf.ptr.wrapping_offset(at));
                let mut pl = Planned::new(Alg::Nothing);
                pl.holds[0] = Some(buf.dt);
                if bytes == 0 || p == 1 {
                    return Ok(pl);
                }
                let span = Span::new(buf.ptr, buf.count, buf.dt);
                let alg = match tune.bcast {
                    BcastAlg::Auto if bytes < 128 << 10 || p <= 2 => BcastAlg::Binomial,
                    BcastAlg::Auto => BcastAlg::Pipeline,
                    a => a,
                };
                // Windows of the packed bytes travel as raw bytes: one architecture only.
                let alg = match alg {
                    BcastAlg::Pipeline | BcastAlg::ScatterAllgather
                        if !self.comm_homogeneous(comm).unwrap_or(false) =>
                    {
                        BcastAlg::Binomial
                    }
                    a => a,
                };
                let data = alg::Bytes { user: span, dense };
                pl.alg = match alg {
                    BcastAlg::Pipeline => {
                        let sub = (tune.pipeline as u64).min(bytes);
                        let need = if dense.is_some() { 0 } else { 2 * sub as usize };
                        let (sc, st) = self.grab(need.next_multiple_of(GRANULE), mode)?;
                        pl.scratch = sc;
                        Alg::BcastChain(BcastChain {
                            g,
                            root,
                            data,
                            total: bytes,
                            sub,
                            slots: [st, st.wrapping_add(sub as usize)],
                        })
                    }
                    BcastAlg::ScatterAllgather => {
                        let need = if dense.is_some() { 0 } else { bytes as usize };
                        let (sc, stage) = self.grab(need, mode)?;
                        pl.scratch = sc;
                        Alg::BcastScatterAllgather(BcastScatterAllgather {
                            g,
                            root,
                            data,
                            total: bytes,
                            chunk: bytes.div_ceil(p as u64),
                            stage,
                        })
                    }
                    _ => Alg::BcastBinomial(BcastBinomial { g, root, buf: span }),
                };
                pl
            }
            Call::Gather { send, recv, root }
            | Call::Scatter {
                send: recv,
                recv: send,
                root,
            } => {
                let is_gather = matches!(call, Call::Gather { .. });
                let root = check_root(root, p)?;
                // `send` is the non-root side's buffer, `recv` the root's blocks.
                if r != root || send.is_some() {
                    let s = send.ok_or(Error::bad_arg(
                        "MPI_IN_PLACE is only valid at the root of a gather or scatter",
                    ))?;
                    types.check_committed(s.dt)?;
                }
                let blocks = if r == root {
                    Some(uniform(types, &recv)?)
                } else {
                    None
                };
                let bsz = match (r == root, send) {
                    (true, _) => packed(types, &recv),
                    (false, Some(s)) => packed(types, &s),
                    _ => 0,
                };
                let binomial = if is_gather {
                    match tune.gather {
                        GatherAlg::Linear => false,
                        GatherAlg::Binomial => true,
                        GatherAlg::Auto => p >= 8 && bsz * p as u64 <= 16 << 10,
                    }
                } else {
                    match tune.scatter {
                        ScatterAlg::Linear => false,
                        ScatterAlg::Binomial => true,
                        ScatterAlg::Auto => p >= 8 && bsz * p as u64 <= 16 << 10,
                    }
                } && bsz * p as u64 <= tune.staging() as u64
                    && self.comm_homogeneous(comm).unwrap_or(false);
                let mut pl = Planned::new(Alg::Nothing);
                pl.holds = [send.map(|s| s.dt), (r == root).then_some(recv.dt), None];
                let empty = Blocks::Uniform {
                    base: core::ptr::null_mut(),
                    count: 0,
                    dt: Datatype::BYTE,
                    ext: 0,
                };
                let blocks = blocks.unwrap_or(empty);
                let own = send.map(|s| Span::new(s.ptr, s.count, s.dt));
                if binomial {
                    let v = (r + p - root) % p;
                    let sub = if v == 0 {
                        p
                    } else {
                        (v & v.wrapping_neg()).min(p - v)
                    };
                    let need = bsz as usize * sub as usize;
                    let (sc, stage) = self.grab(need, mode)?;
                    pl.scratch = sc;
                    pl.alg = if is_gather {
                        Alg::GatherBinomial(GatherBinomial {
                            g,
                            root,
                            own: own.unwrap_or(blocks.block(root)),
                            recv: blocks,
                            stage,
                            bsz,
                        })
                    } else {
                        Alg::ScatterBinomial(ScatterBinomial {
                            g,
                            root,
                            send: blocks,
                            own,
                            stage,
                            bsz,
                        })
                    };
                } else if is_gather {
                    pl.alg = Alg::GatherLinear(GatherLinear {
                        g,
                        root,
                        own,
                        recv: blocks,
                    });
                } else {
                    pl.alg = Alg::ScatterLinear(ScatterLinear {
                        g,
                        root,
                        send: blocks,
                        own,
                    });
                }
                pl
            }
            Call::Gatherv { send, recv, root } => {
                let root = check_root(root, p)?;
                if let Some(s) = send {
                    types.check_committed(s.dt)?;
                } else if r != root {
                    return Err(Error::bad_arg(
                        "MPI_IN_PLACE is only valid at the root of a gather",
                    ));
                }
                let blocks = if r == root {
                    vblocks(types, &recv, p)?
                } else {
                    Blocks::Uniform {
                        base: core::ptr::null_mut(),
                        count: 0,
                        dt: Datatype::BYTE,
                        ext: 0,
                    }
                };
                let mut pl = Planned::new(Alg::GatherLinear(GatherLinear {
                    g,
                    root,
                    own: send.map(|s| Span::new(s.ptr, s.count, s.dt)),
                    recv: blocks,
                }));
                pl.holds = [send.map(|s| s.dt), (r == root).then_some(recv.dt), None];
                pl
            }
            Call::Scatterv { send, recv, root } => {
                let root = check_root(root, p)?;
                if let Some(s) = recv {
                    types.check_committed(s.dt)?;
                } else if r != root {
                    return Err(Error::bad_arg(
                        "MPI_IN_PLACE is only valid at the root of a scatter",
                    ));
                }
                let blocks = if r == root {
                    vblocks(types, &send, p)?
                } else {
                    Blocks::Uniform {
                        base: core::ptr::null_mut(),
                        count: 0,
                        dt: Datatype::BYTE,
                        ext: 0,
                    }
                };
                let mut pl = Planned::new(Alg::ScatterLinear(ScatterLinear {
                    g,
                    root,
                    send: blocks,
                    own: recv.map(|s| Span::new(s.ptr, s.count, s.dt)),
                }));
                pl.holds = [recv.map(|s| s.dt), (r == root).then_some(send.dt), None];
                pl
            }
            Call::Allgather { send, recv } => {
                if let Some(s) = send {
                    types.check_committed(s.dt)?;
                }
                let blocks = uniform(types, &recv)?;
                let total = packed(types, &recv) * p as u64;
                let pof2 = p.is_power_of_two();
                let kind = match tune.allgather {
                    AllgatherAlg::RecDbl if pof2 => AgKind::RecDbl,
                    AllgatherAlg::Bruck => AgKind::Bruck,
                    AllgatherAlg::Ring => AgKind::Ring,
                    AllgatherAlg::Linear => AgKind::Linear,
                    _ if pof2 && total <= 512 << 10 => AgKind::RecDbl,
                    _ if total <= 64 << 10 => AgKind::Bruck,
                    _ => AgKind::Ring,
                };
                let mut pl = Planned::new(Alg::Allgather(Allgather {
                    g,
                    kind,
                    own: send.map(|s| Span::new(s.ptr, s.count, s.dt)),
                    recv: blocks,
                }));
                pl.holds = [send.map(|s| s.dt), Some(recv.dt), None];
                pl
            }
            Call::Allgatherv { send, recv } => {
                if let Some(s) = send {
                    types.check_committed(s.dt)?;
                }
                let blocks = vblocks(types, &recv, p)?;
                let size = exec::type_size(types, recv.dt);
                // SAFETY: checked above: an entry per rank.
                let total: u64 = (0..p)
                    .map(|i| unsafe { recv.counts.get(i as usize) } as u64 * size)
                    .sum();
                let kind = match tune.allgatherv {
                    AllgathervAlg::Linear => AgKind::Linear,
                    AllgathervAlg::Ring => AgKind::Ring,
                    AllgathervAlg::Auto if p <= 8 && total <= 64 << 10 => AgKind::Linear,
                    AllgathervAlg::Auto => AgKind::Ring,
                };
                let mut pl = Planned::new(Alg::Allgather(Allgather {
                    g,
                    kind,
                    own: send.map(|s| Span::new(s.ptr, s.count, s.dt)),
                    recv: blocks,
                }));
                pl.holds = [send.map(|s| s.dt), Some(recv.dt), None];
                pl
            }
            Call::Alltoall { send, recv } => {
                let rb = uniform(types, &recv)?;
                let bsz = packed(types, &recv);
                let mut pl = Planned::new(Alg::Nothing);
                pl.holds = [send.map(|s| s.dt), Some(recv.dt), None];
                let Some(send) = send else {
                    let need = span_bytes(types, &rb.block(0));
                    let (sc, tmp) = self.grab(need, mode)?;
                    pl.scratch = sc;
                    pl.alg = Alg::AlltoallInPlace(AlltoallInPlace { g, recv: rb, tmp });
                    return Ok(pl);
                };
                let sb = uniform(types, &send)?;
                let alg = match tune.alltoall {
                    AlltoallAlg::Auto if bsz <= 256 && p >= 8 => AlltoallAlg::Bruck,
                    AlltoallAlg::Auto if bsz * (p as u64) <= 1 << 20 => AlltoallAlg::Linear,
                    AlltoallAlg::Auto => AlltoallAlg::Pairwise,
                    a => a,
                };
                let bruck_ok = p <= 2 * exec::BATCH
                    && 2 * bsz * p as u64 <= tune.staging() as u64
                    && self.comm_homogeneous(comm).unwrap_or(false);
                pl.alg = match alg {
                    AlltoallAlg::Bruck if bruck_ok => {
                        let half = p.div_ceil(2) as usize;
                        let b = bsz as usize;
                        let (sc, base) = self.grab(b * (p as usize + 2 * half), mode)?;
                        pl.scratch = sc;
                        Alg::AlltoallBruck(AlltoallBruck {
                            g,
                            send: sb,
                            recv: rb,
                            tmp: base,
                            sb: base.wrapping_add(b * p as usize),
                            rb: base.wrapping_add(b * (p as usize + half)),
                            bsz,
                        })
                    }
                    AlltoallAlg::Pairwise => Alg::Alltoall(Alltoall {
                        g,
                        kind: AaKind::Pairwise,
                        send: sb,
                        recv: rb,
                    }),
                    _ => Alg::Alltoall(Alltoall {
                        g,
                        kind: AaKind::Linear,
                        send: sb,
                        recv: rb,
                    }),
                };
                pl
            }
            Call::Alltoallv { send, recv } => {
                let rb = vblocks(types, &recv, p)?;
                let sb = send.map(|s| vblocks(types, &s, p)).transpose()?;
                let mut pl = self.alltoallv(g, sb, rb, mode)?;
                pl.holds = [send.map(|s| s.dt), Some(recv.dt), None];
                pl
            }
            Call::Alltoallw { send, recv } => {
                let rb = wblocks(types, &recv, p)?;
                let sb = send.map(|s| wblocks(types, &s, p)).transpose()?;
                self.alltoallv(g, sb, rb, mode)?
            }
            Call::Reduce {
                send,
                recv,
                count,
                dt,
                op,
                root,
            } => {
                let root = check_root(root, p)?;
                if send.is_none() && r != root {
                    return Err(Error::bad_arg(
                        "MPI_IN_PLACE is only valid at the root of a reduce",
                    ));
                }
                let out = (r == root).then_some(recv);
                // SAFETY: the caller's contract.
                unsafe {
                    self.plan_reduction(
                        g,
                        RedKind::Reduce { root },
                        send,
                        out,
                        count,
                        dt,
                        op,
                        mode,
                    )?
                }
            }
            Call::Allreduce {
                send,
                recv,
                count,
                dt,
                op,
            } => {
                // SAFETY: the caller's contract.
                unsafe {
                    self.plan_reduction(
                        g,
                        RedKind::Allreduce,
                        send,
                        Some(recv),
                        count,
                        dt,
                        op,
                        mode,
                    )?
                }
            }
            Call::ReduceScatterBlock {
                send,
                recv,
                count,
                dt,
                op,
            } => {
                // SAFETY: the caller's contract.
                unsafe {
                    self.plan_reduction(
                        g,
                        RedKind::ReduceScatter(Counts::Block(count)),
                        send,
                        Some(recv),
                        count,
                        dt,
                        op,
                        mode,
                    )?
                }
            }
            Call::ReduceScatter {
                send,
                recv,
                counts,
                dt,
                op,
            } => {
                check_counts(counts, p)?;
                // SAFETY: checked: an entry per rank.
                let mine = unsafe { counts.get(r as usize) } as u64;
                // SAFETY: the caller's contract.
                unsafe {
                    self.plan_reduction(
                        g,
                        RedKind::ReduceScatter(Counts::V(counts, 1)),
                        send,
                        Some(recv),
                        mine,
                        dt,
                        op,
                        mode,
                    )?
                }
            }
            Call::Scan {
                send,
                recv,
                count,
                dt,
                op,
            } => {
                // SAFETY: the caller's contract.
                unsafe {
                    self.plan_reduction(g, RedKind::Scan, send, Some(recv), count, dt, op, mode)?
                }
            }
            Call::Exscan {
                send,
                recv,
                count,
                dt,
                op,
            } => {
                // SAFETY: the caller's contract.
                unsafe {
                    self.plan_reduction(g, RedKind::Exscan, send, Some(recv), count, dt, op, mode)?
                }
            }
        })
    }

    /// All-to-all with per-rank blocks (`v` and `w`).
    fn alltoallv(
        &mut self,
        g: Grp,
        send: Option<Blocks>,
        recv: Blocks,
        mode: Mode,
    ) -> Result<Planned> {
        let p = g.size;
        let Some(send) = send else {
            let need = (0..p)
                .map(|i| span_bytes(&self.p2p.types, &recv.block(i)))
                .max()
                .unwrap_or(0);
            let (sc, tmp) = self.grab(need, mode)?;
            let mut pl = Planned::new(Alg::AlltoallInPlace(AlltoallInPlace { g, recv, tmp }));
            pl.scratch = sc;
            return Ok(pl);
        };
        let total: u64 = (0..p)
            .map(|i| {
                let b = send.block(i);
                b.count * exec::type_size(&self.p2p.types, b.dt)
            })
            .sum();
        let kind = match self.coll.tune.alltoallv {
            AlltoallvAlg::Pairwise => AaKind::Pairwise,
            AlltoallvAlg::Linear => AaKind::Linear,
            AlltoallvAlg::Auto if total <= 1 << 20 => AaKind::Linear,
            AlltoallvAlg::Auto => AaKind::Pairwise,
        };
        Ok(Planned::new(Alg::Alltoall(Alltoall {
            g,
            kind,
            send,
            recv,
        })))
    }

    /// The working form of a reduction over `dt` with `op`: its description, the number of
    /// working elements per instance of `dt`, and the offset at which a user's buffer already
    /// holds that form (`None`: each segment is converted).
    fn working_form(&self, dt: Datatype, op: Op) -> Result<(Red, u64, Option<isize>)> {
        let info = *self.p2p.types.check_committed(dt)?;
        if let Op::User(_) = op {
            let u = self.user_op(op)?;
            if info.extent <= 0 {
                return Err(Error::unsupported(
                    "user-defined reductions over datatypes of zero or negative extent",
                ));
            }
            let red = Red {
                op: ROp::User(u),
                w: dt,
                ext: info.extent,
                true_lb: info.true_lb,
                true_ext: info.true_extent,
                size: info.size,
            };
            return Ok((red, 1, Some(0)));
        }
        let w = base_type(&self.p2p.types, dt, 0).ok_or(Error::unsupported(
            "reductions over derived datatypes whose elements are not all one predefined type",
        ))?;
        op::check(op, w)?;
        let red = Red {
            op: ROp::Predef(op),
            w,
            ext: w.extent() as isize,
            true_lb: 0,
            true_ext: w.extent() as isize,
            size: w.size() as u64,
        };
        if dt.is_predefined() {
            return Ok((red, 1, Some(0)));
        }
        let per = info.size / red.size.max(1);
        let direct = match (info.dense_at, w.is_contiguous()) {
            (Some(at), true) => Some(at),
            _ => None,
        };
        Ok((red, per, direct))
    }

    /// Plans a reduction of `count` instances of `dt` (for a reduce-scatter: this rank's share).
    ///
    /// # Safety
    /// As for [`Engine::collective`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn plan_reduction(
        &mut self,
        g: Grp,
        kind: RedKind,
        send: Option<*const u8>,
        recv: Option<*mut u8>,
        count: u64,
        dt: Datatype,
        op: Op,
        mode: Mode,
    ) -> Result<Planned> {
        let (red, per_inst, direct) = self.working_form(dt, op)?;
        let p = g.size;
        let commute = red.op.commutes();
        let (kind, total, out_count) = match kind {
            RedKind::ReduceScatter(Counts::Block(n)) => (
                RedKind::ReduceScatter(Counts::Block(n * per_inst)),
                n * per_inst * p as u64,
                if send.is_none() { n * p as u64 } else { n },
            ),
            RedKind::ReduceScatter(Counts::V(c, _)) => {
                let all = Counts::V(c, 1).disp(p);
                (
                    RedKind::ReduceScatter(Counts::V(c, per_inst)),
                    all * per_inst,
                    if send.is_none() { all } else { count },
                )
            }
            k => (k, count * per_inst, count),
        };
        let in_count = match kind {
            RedKind::ReduceScatter(_) => total / per_inst.max(1),
            _ => count,
        };
        let mut pl = Planned::new(Alg::Nothing);
        pl.holds[0] = Some(dt);
        if total == 0 {
            return Ok(pl);
        }
        let tune = self.coll.tune;
        let bytes = total * red.size;
        let alg = match kind {
            RedKind::Local => RedAlg::Local,
            RedKind::Reduce { .. } => match tune.reduce {
                ReduceAlg::Pipeline if commute => RedAlg::Chain,
                ReduceAlg::Auto if commute && p >= 3 && bytes >= 64 << 10 => RedAlg::Chain,
                _ => RedAlg::Binomial,
            },
            RedKind::Allreduce => match tune.allreduce {
                AllreduceAlg::RecDbl => RedAlg::RecDbl,
                AllreduceAlg::ReduceBcast => RedAlg::ReduceBcast,
                AllreduceAlg::Ring if commute => RedAlg::Ring,
                AllreduceAlg::Rabenseifner if commute => RedAlg::Rabenseifner,
                _ if !commute || bytes <= 4096 || total < p as u64 => RedAlg::RecDbl,
                _ if p.is_power_of_two() => RedAlg::Rabenseifner,
                _ => RedAlg::Ring,
            },
            RedKind::ReduceScatter(_) => match tune.reduce_scatter {
                _ if !commute => RedAlg::ReduceThenScatter,
                ReduceScatterAlg::Ring => RedAlg::Ring,
                ReduceScatterAlg::Halving => RedAlg::Halving,
                ReduceScatterAlg::ReduceScatter => RedAlg::ReduceThenScatter,
                ReduceScatterAlg::Auto if bytes <= 256 << 10 => RedAlg::Halving,
                ReduceScatterAlg::Auto => RedAlg::Ring,
            },
            RedKind::Scan | RedKind::Exscan => match tune.scan {
                ScanAlg::Linear => RedAlg::Linear,
                _ => RedAlg::RecDbl,
            },
        };
        // A segment never exceeds the message, so small non-blocking reductions take little of
        // the shared scratch (every rank computes the same `total`, hence the same segments).
        let per = ((tune.segment / red.ext as usize) as u64).max(1).min(total);
        let unit = red.bytes(per).next_multiple_of(GRANULE);
        let conv = if direct.is_some() { 0 } else { 2 };
        let nbufs = alg.buffers(&kind) + conv;
        // A reduce-scatter's counts are read as its steps run: they are copied beside its
        // scratch, as the user (or a binding that converted them into a temporary) may reuse
        // the array once the call has returned.
        let counts_len = match kind {
            RedKind::ReduceScatter(Counts::V(c, _)) => {
                c.bytes(p as usize).next_multiple_of(GRANULE)
            }
            _ => 0,
        };
        let (sc, base) = self.grab(unit * nbufs + counts_len, mode)?;
        pl.scratch = sc;
        let kind = match kind {
            RedKind::ReduceScatter(Counts::V(c, m)) => {
                // SAFETY: `c` has an entry per rank (checked when the collective started), and
                // the scratch just taken holds `p` more after the buffers (64-byte aligned).
                let copy = unsafe { c.copy_to(base.wrapping_add(unit * nbufs), p as usize) };
                RedKind::ReduceScatter(Counts::V(copy, m))
            }
            k => k,
        };
        let buf = |i: usize| red.base(base.wrapping_add(i * unit));
        let plan = RedPlan {
            kind,
            alg,
            g,
            red,
            total,
            per,
            pipe: ((tune.pipeline / red.ext as usize) as u64).max(1),
            inp: send.map(|s| Span::new(s as *mut u8, in_count, dt)),
            out: recv.map(|o| Span::new(o, out_count, dt)),
            direct,
            conv_in: buf(0),
            conv_out: buf(1),
            s: [buf(conv), buf(conv + 1), buf(conv + 2)],
        };
        pl.red = Some(red);
        pl.segs = Some(Segs {
            plan,
            a: 0,
            b: per.min(total),
        });
        // SAFETY: the caller's contract; the first segment's input is converted now.
        unsafe { plan.convert_in(&self.p2p.types, 0, per.min(total))? };
        pl.alg = plan.segment(0, per.min(total));
        Ok(pl)
    }

    // ---- user-defined operations ----------------------------------------------------------------

    /// Registers a user-defined operation (`MPI_Op_create`).
    // Reached only from the C API.
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub fn op_create(&mut self, op: UserOp) -> Result<Op> {
        let slots = &mut self.coll.user_ops;
        let i = match slots.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                let n = slots.len();
                let to = (2 * n).clamp(1, slots.max());
                slots.grow_to(to, |_| None, "user-defined operations", MAX_USER_OPS.name)?;
                n
            }
        };
        slots[i] = Some(op);
        Ok(Op::User(i as u16))
    }

    /// Frees a user-defined operation (`MPI_Op_free`); collectives in flight keep their copy.
    // Reached only from the C API.
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub fn op_free(&mut self, op: Op) -> Result<()> {
        self.user_op(op)?;
        if let Op::User(i) = op {
            self.coll.user_ops[i as usize] = None;
        }
        Ok(())
    }

    /// Whether `op` commutes (`MPI_Op_commutative`).
    // Reached only from the C API.
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub fn op_commutative(&self, op: Op) -> Result<bool> {
        match op {
            Op::User(_) => Ok(self.user_op(op)?.commute),
            o => Ok(o.is_commutative()),
        }
    }

    fn user_op(&self, op: Op) -> Result<UserOp> {
        let bad = Error::new(
            ErrorClass::Op,
            Reason::BadArgument {
                what: "not a live user-defined operation",
            },
        );
        match op {
            Op::User(i) => self
                .coll
                .user_ops
                .get(i as usize)
                .copied()
                .flatten()
                .ok_or(bad),
            _ => Err(bad),
        }
    }

    /// `inout = input op inout` over `count` instances of `dt` (`MPI_Reduce_local`).
    ///
    /// # Safety
    /// Both buffers hold `count` instances of `dt`, not overlapping.
    // Reached only from the C API.
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub unsafe fn reduce_local(
        &mut self,
        input: *const u8,
        inout: *mut u8,
        count: u64,
        dt: Datatype,
        op: Op,
    ) -> Result<()> {
        let g = Grp { rank: 0, size: 1 };
        // SAFETY: the caller's contract.
        let pl = unsafe {
            self.plan_reduction(
                g,
                RedKind::Local,
                Some(input),
                Some(inout),
                count,
                dt,
                op,
                Mode::Blocking,
            )?
        };
        let mut c = Coll::new(CommId::SELF, 0, pl.alg);
        c.red = pl.red;
        c.segs = pl.segs;
        c.scratch = pl.scratch;
        // A local reduction has no messages: its steps all finish in this one advance.
        while !c.advance(self.p2p) {}
        self.ungrab(c.scratch);
        c.err.map_or(Ok(()), Err)
    }
}

/// Runs or starts collective `call` on `comm` (`MPI_Barrier`, `MPI_Ibcast`, ...); returns the
/// request of a non-blocking one.
///
/// Arguments are checked alike at every member before any data moves (root, counts,
/// datatypes, the operation on the type), so that all fail together.
///
/// # Safety
/// MPI's rules for the buffers and arrays of `call`: each holds what its counts and types
/// describe, send buffers stay unchanged and receive buffers untouched by the caller until
/// the operation completes (for a non-blocking one, until its request does), and the arrays
/// stay valid as long.
pub unsafe fn collective(
    cx: &mut Inside,
    comm: CommId,
    call: Call,
    mode: Mode,
) -> Result<Option<ReqId>> {
    match mode {
        Mode::NonBlocking { scope } => {
            // SAFETY: the caller's contract.
            unsafe { cx.e().colls().start(comm, call, scope, None) }.map(Some)
        }
        // SAFETY: the caller's contract.
        Mode::Blocking => unsafe { blocking(cx, comm, call, None) }.map(|_| None),
    }
}

/// Runs blocking collective `call` on `comm` to its end, under `tag` when the caller reserved
/// one (else the communicator's next).
///
/// # Safety
/// As for [`collective`].
pub(crate) unsafe fn blocking(
    cx: &mut Inside,
    comm: CommId,
    call: Call,
    tag: Option<i32>,
) -> Result<()> {
    let c = cx.e().check_comm(comm)?;
    if c.is_inter() {
        let tags = tag.map(|t| (t, t));
        // SAFETY: the caller's contract.
        let (mut c, _) = unsafe {
            cx.e()
                .colls()
                .inter_plan(comm, call, Mode::Blocking, tags)?
        };
        run(cx, &mut c);
        let mut colls = cx.e().colls();
        c.scratches().for_each(|s| colls.ungrab(s));
        return c.err.map_or(Ok(()), Err);
    }
    let g = Grp {
        rank: c.rank,
        size: c.size(),
    };
    // SAFETY: the caller's contract.
    if unsafe { hier::blocking(cx, comm, &call)? } {
        return Ok(());
    }
    // SAFETY: the caller's contract.
    if unsafe { sm::blocking(cx, comm, g, &call)? } {
        return Ok(());
    }
    // SAFETY: the caller's contract.
    if g.size == 2 && unsafe { pair::blocking(cx, comm, g, &call, tag)? } {
        return Ok(());
    }
    let mut colls = cx.e().colls();
    if let Some(mut pl) = colls.fast_plan(g, &call) {
        // One segment in the blocking region, given back after.
        let tag = colls.coll_tag_for(comm, tag);
        let r = direct(cx, comm, tag, &mut pl.alg, pl.red.as_ref());
        cx.e().colls().ungrab(pl.scratch);
        return r;
    }
    // SAFETY: the caller's contract.
    let mut planned = unsafe { colls.plan(comm, g, call, Mode::Blocking)? };
    let tag = colls.coll_tag_for(comm, tag);
    if direct_alg(&planned.alg) {
        let r = direct(cx, comm, tag, &mut planned.alg, None);
        cx.e().colls().ungrab(planned.scratch);
        return r;
    }
    let mut c = Coll::new(comm, tag, planned.alg);
    c.red = planned.red;
    c.segs = planned.segs;
    c.scratch = planned.scratch;
    run(cx, &mut c);
    cx.e().colls().ungrab(c.scratch);
    c.err.map_or(Ok(()), Err)
}

/// Drives a blocking collective to its end.
fn run(cx: &mut Inside, c: &mut Coll) {
    loop {
        let e = cx.e();
        if c.advance(&mut e.p2p) {
            return;
        }
        cx.round();
    }
}

/// Runs a blocking broadcast or barrier (see [`direct_alg`]) step by step straight through
/// the point-to-point engine: the same messages, in the same order and with the same tag, as
/// the executor sends for `alg` — so members may take either path — without building a
/// schedule (its setup is most of a small broadcast's cost).
fn direct(cx: &mut Inside, comm: CommId, tag: i32, alg: &mut Alg, red: Option<&Red>) -> Result<()> {
    let mut pending: heapless::Vec<ReqId, MAX_ACTS> = heapless::Vec::new();
    for k in 0.. {
        let mut colls = cx.e().colls();
        let mut acts = Acts::new();
        if !alg.step(k, &mut acts, &colls.p2p.types) {
            return Ok(());
        }
        if acts.overflow {
            return Err(Error::internal(
                "a collective step yielded more actions than its bound",
            ));
        }
        for a in acts.list() {
            // SAFETY: the algorithm's buffers are the caller's (lent for the call) and the
            // blocking scratch region, sized by the plan.
            unsafe { exec::local(&colls.p2p.types, red, a)? };
        }
        // Sends before receives (the executor posts receives first): a message goes out
        // as early as it can, and posting the receives overlaps its flight. Arrivals are
        // only taken in by progress, after the receives are posted, so they still find
        // them; a send that cannot go at once becomes a request, as in the executor.
        for a in acts.list() {
            if let Act::Send(to, sp) = *a {
                // SAFETY: as above; the call waits for a send left in flight below.
                if let Some(id) = unsafe { colls.isend_span(sp, to, tag, comm)? } {
                    let _ = pending.push(id);
                }
            }
        }
        for a in acts.list() {
            if let Act::Recv(from, sp) = *a {
                // SAFETY: as above; the call waits for the receive below.
                let id = unsafe { colls.irecv_span(sp, from, tag, comm)? };
                let _ = pending.push(id);
            }
        }
        while let Some(id) = pending.pop() {
            let st = cx.wait(id)?;
            if let Some(e) = st.error {
                return Err(e);
            }
        }
    }
    Ok(())
}

// ---- convenience forms (the Rust API) -----------------------------------------------------------

/// Blocks until every member of `comm` has called it (`MPI_Barrier`).
pub fn barrier(cx: &mut Inside, comm: CommId) -> Result<()> {
    // SAFETY: a barrier has no buffers.
    unsafe { blocking(cx, comm, Call::Barrier, None) }
}

/// Broadcasts `count` instances of `datatype` at `buf` from `root` (`MPI_Bcast`).
///
/// # Safety
/// Every byte the type map of `count` instances touches from `buf` must be readable and
/// writable, and not otherwise accessed during the call.
pub unsafe fn bcast(
    cx: &mut Inside,
    buf: *mut u8,
    count: u64,
    datatype: Datatype,
    root: i32,
    comm: CommId,
) -> Result<()> {
    let buf = Buf {
        ptr: buf,
        count,
        dt: datatype,
    };
    // SAFETY: the caller's contract.
    unsafe { blocking(cx, comm, Call::Bcast { buf, root }, None) }
}

/// Reduces every member's input with `op` into `output` at `root` (`MPI_Reduce`).
///
/// At the root `output` is the receive buffer and `input` the send buffer, or `None` for
/// `MPI_IN_PLACE` (the input is then in `output`). Elsewhere `input` is the send buffer and
/// `output` is ignored. Buffers hold `count` elements of predefined `datatype`.
#[allow(clippy::too_many_arguments)]
pub fn reduce(
    cx: &mut Inside,
    input: Option<&[u8]>,
    output: Option<&mut [u8]>,
    count: usize,
    datatype: Datatype,
    op: Op,
    root: i32,
    comm: CommId,
) -> Result<()> {
    let bytes = count * datatype.extent();
    if input.is_some_and(|i| i.len() < bytes) || output.as_ref().is_some_and(|o| o.len() < bytes) {
        return Err(Error::new(ErrorClass::Buffer, Reason::CountTooLarge));
    }
    let is_root = cx.e().colls().grp(comm)?.rank as i32 == root;
    let recv = match output {
        Some(o) => o.as_mut_ptr(),
        None if is_root => return Err(Error::new(ErrorClass::Buffer, Reason::NullBuffer)),
        None => core::ptr::null_mut(),
    };
    let call = Call::Reduce {
        send: input.map(|i| i.as_ptr()),
        recv,
        count: count as u64,
        dt: datatype,
        op,
        root,
    };
    // SAFETY: the slices hold `count` elements and are borrowed for the call.
    unsafe { blocking(cx, comm, call, None) }
}

/// Reduces every member's input with `op` into every member's `output` (`MPI_Allreduce`).
/// `input` is `None` for `MPI_IN_PLACE` (the input is then in `output`).
pub fn allreduce(
    cx: &mut Inside,
    input: Option<&[u8]>,
    output: &mut [u8],
    count: usize,
    datatype: Datatype,
    op: Op,
    comm: CommId,
) -> Result<()> {
    let bytes = count * datatype.extent();
    if input.is_some_and(|i| i.len() < bytes) || output.len() < bytes {
        return Err(Error::new(ErrorClass::Buffer, Reason::CountTooLarge));
    }
    let call = Call::Allreduce {
        send: input.map(|i| i.as_ptr()),
        recv: output.as_mut_ptr(),
        count: count as u64,
        dt: datatype,
        op,
    };
    // SAFETY: the slices hold `count` elements and are borrowed for the call.
    unsafe { blocking(cx, comm, call, None) }
}

#[cfg(test)]
mod choice_tests {
    use super::*;

    #[test]
    fn algorithms_are_named_or_numbered_from_one() {
        let names = AllreduceAlg::NAMES;
        assert_eq!(choice("", names), Some(0));
        assert_eq!(choice("auto", names), Some(0));
        assert_eq!(choice("ring", names), Some(2));
        assert_eq!(choice(" 2 ", names), Some(2));
        assert_eq!(choice("4", names), Some(4));
        assert_eq!(choice("5", names), None);
        assert_eq!(choice("fastest", names), None);
        assert_eq!(AllreduceAlg::parse("ring"), Some(AllreduceAlg::Ring));
        assert_eq!(AllreduceAlg::parse("0"), Some(AllreduceAlg::Auto));
    }
}
