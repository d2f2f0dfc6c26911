//! The engine: one process's MPI state, and the progress loop.
//!
//! [`Engine::new`] takes what the platform hands over — memory for every pool, its services, its
//! runtime and its BTL modules — exchanges business cards through the modex, builds the routes to
//! every peer and the predefined communicators. After that nothing is allocated.
//!
//! Entry points validate their arguments (the MPI layer's job) and call into the PML; blocking
//! ones loop on [`Engine::progress`], relaxing the core through the platform when nothing moved.

use core::fmt::Write as _;
use core::mem::MaybeUninit;

use heapless::Vec;

use crate::arch::Arch;
use crate::arena::{Arena, Sizer};
use crate::bml::{Bml, MAX_BTLS};
use crate::btl::loopback::{self, Loopback};
use crate::btl::{Btl, Modex, ModexPut, PeerInfo};
use crate::comm::{self, Comm, CommId, CommSimilarity, CommTable, ContextId, ErrHandler, Levels};
use crate::datatype::convertor::{Packer, Unpacker};
use crate::datatype::repr::Repr;
use crate::datatype::table::TypeTable;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::group::{self, Group, GroupTable, Similarity};
use crate::memory::Memory;
use crate::mtl::{MtlEnvelope, MtlSelector};
use crate::params::{Default, Kind, ParamDef, Params};
use crate::platform::{Level, Platform};
use crate::pml::request::{
    ReqId, SendMode, Source, Status, TagSel, ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB,
};
use crate::pml::{self, Incoming, MsgId, Ob1};
use crate::rte::{ProcId, Rte};
use crate::topo::{self, TopoTable};

/// `btl`: which BTL components to use.
pub static BTL_SELECT: ParamDef = ParamDef {
    name: "btl",
    kind: Kind::Str,
    default: Default::Str(""),
    description:
        "BTL components to use, e.g. 'sm,self'; '^tcp' excludes; empty means all available",
};

/// While a blocking receive waits over an MTL, every how many rounds one is the whole progress
/// round (everything else keeps moving, at a sixteenth of the rounds).
const FULL_ROUND_EVERY: u32 = 16;

/// A destination rank checked for a send, with what a message to it carries.
#[derive(Clone, Copy)]
struct Dest {
    /// Rank in the communicator.
    rank: u32,
    /// Its process.
    proc: ProcId,
    /// The communicator's context id.
    ctx: u16,
    /// This process's rank in the communicator (the sender's in the envelope).
    me: u32,
}

impl Dest {
    /// The envelope of a message to it with `tag`, as an MTL matches it.
    fn envelope(&self, tag: i32) -> MtlEnvelope {
        MtlEnvelope {
            ctx: self.ctx,
            src: self.me,
            tag,
        }
    }
}

/// Every parameter the core registers.
pub fn core_params() -> impl Iterator<Item = &'static ParamDef> {
    [&BTL_SELECT]
        .into_iter()
        .chain(pml::PARAMS)
        .chain(crate::bml::PARAMS)
        .chain(comm::PARAMS)
        .chain(crate::group::PARAMS)
        .chain(crate::topo::PARAMS)
        .chain(crate::coll::PARAMS)
        .chain(crate::datatype::table::PARAMS)
        .chain(loopback::PARAMS)
        .chain(crate::objects::PARAMS)
        .chain(crate::memory::PARAMS)
}

/// What the platform hands the engine at init.
pub struct Init {
    /// Memory for every pool at its initial size; see [`Engine::memory_needed`]. Pools grow
    /// later by [`Platform::grant`], within `mpi_memory_max`.
    pub memory: &'static mut [MaybeUninit<u8>],
    /// Parameters, with the platform's sources and its components' definitions registered.
    pub params: Params,
    /// Clock, relax, log.
    pub platform: &'static dyn Platform,
    /// The runtime.
    pub rte: &'static mut dyn Rte,
    /// The platform's BTL modules (the core adds `self`).
    pub btls: Vec<&'static mut dyn Btl, MAX_BTLS>,
}

/// One process's MPI engine.
pub struct Engine {
    pub(crate) platform: &'static dyn Platform,
    /// Everything the engine holds, counted against `mpi_memory_max`.
    memory: &'static Memory,
    rte: &'static mut dyn Rte,
    params: Params,
    pub(crate) bml: Bml,
    pub(crate) pml: Ob1,
    pub(crate) comms: CommTable,
    pub(crate) types: TypeTable,
    /// Info objects, attributes and names, user error handlers (the MPI layer's user state).
    pub(crate) objects: crate::objects::Objects,
    pub(crate) procs: &'static [PeerInfo],
    /// Every process published this process's architecture: no peer needs
    /// [`Engine::check_arch`] (the common job, whose receives skip looking the sender up).
    uniform_arch: bool,
    pub(crate) me: ProcId,
    next_scope: u32,
    finalized: bool,
    /// Consecutive progress rounds that moved nothing (for the platform's relax policy).
    pub(crate) idle: u32,
    /// Some freed communicator waits for its receives or collectives to end.
    pub(crate) comms_draining: bool,
    /// Collectives: non-blocking ones in flight, scratch, user-defined operations.
    pub(crate) coll: crate::coll::CollState,
    /// Memory for building communicators.
    pub(crate) creation: comm::create::Scratch,
}

struct RteModex<'a>(&'a mut dyn Rte);

impl Modex for RteModex<'_> {
    fn get(&mut self, proc: ProcId, key: &str, out: &mut [u8]) -> Result<Option<usize>> {
        self.0.modex_get(proc, key, out)
    }
}

impl ModexPut for RteModex<'_> {
    fn put(&mut self, key: &str, value: &[u8]) -> Result<()> {
        self.0.modex_put(key, value)
    }
}

/// Whether component `name` is selected by the `btl` parameter's value `list`.
pub fn btl_selected(list: &str, name: &str) -> bool {
    let list = list.trim();
    if list.is_empty() {
        return true;
    }
    match list.strip_prefix('^') {
        Some(excluded) => !excluded.split(',').any(|n| n.trim() == name),
        None => list.split(',').any(|n| n.trim() == name),
    }
}

impl Engine {
    /// Registers the core's parameters in `params` (idempotent).
    pub fn register_params(params: &mut Params) -> Result<()> {
        core_params().try_for_each(|d| params.register(d))
    }

    /// Bytes of memory the engine needs at init for a job of `procs` processes with these
    /// parameters (the pools at their initial sizes; they grow later within `mpi_memory_max`).
    pub fn memory_needed(params: &Params, procs: u32) -> usize {
        let mut s = Sizer::default();
        s.slice::<Memory>(1);
        let comms = params.u32(&comm::COMM_MAX);
        Ob1::size(params, &mut s, procs, comms);
        CommTable::size(&mut s, comms, params.u32(&comm::MAX_CIDS));
        GroupTable::size(
            &mut s,
            params.u32(&group::GROUP_MAX),
            params.u32(&group::GROUP_MAX_MEMBERS),
            procs,
        );
        comm::create::Scratch::size(&mut s, procs);
        TopoTable::size(
            &mut s,
            params.u32(&topo::TOPO_MAX),
            params.u32(&topo::TOPO_MAX_INTS),
        );
        Bml::size(&mut s, procs);
        Loopback::size(params, &mut s);
        TypeTable::size(params, &mut s);
        crate::objects::Objects::size(params, &mut s);
        s.slice::<Loopback>(1).slice::<PeerInfo>(procs as usize);
        crate::coll::CollState::size(params, &mut s);
        s.bytes()
    }

    /// Brings the engine up: pools, modex, routes, `MPI_COMM_WORLD` and `MPI_COMM_SELF`.
    pub fn new(init: Init) -> Result<Engine> {
        Engine::with_mtl(init, None)
    }

    /// Like [`Engine::new`], with a matching transport for the `cm` path: point-to-point goes
    /// through `mtl` unless the parameter `pml` says `ob1` (the platform then should not have
    /// made one). `pml` = `cm` without an MTL is an error.
    pub fn with_mtl(
        init: Init,
        mut mtl: Option<&'static mut dyn crate::mtl::Mtl>,
    ) -> Result<Engine> {
        let Init {
            memory,
            mut params,
            platform,
            rte,
            btls,
        } = init;
        Engine::register_params(&mut params)?;
        let me = rte.rank();
        let n = rte.size();
        let max_cids = params.u32(&comm::MAX_CIDS);
        if !max_cids.is_multiple_of(64) {
            return Err(Error::new(
                ErrorClass::Arg,
                Reason::BadParam {
                    name: comm::MAX_CIDS.name,
                },
            ));
        }
        let needed = Engine::memory_needed(&params, n);
        if memory.len() < needed {
            return Err(Error::new(
                ErrorClass::NoMem,
                Reason::MemoryTooSmall {
                    needed,
                    given: memory.len(),
                },
            ));
        }
        let bound = Memory::bound(&params, platform);
        if memory.len() > bound {
            return Err(Error::new(
                ErrorClass::NoMem,
                Reason::MemoryBound {
                    what: "the engine's initial pools",
                    max: bound,
                    param: crate::memory::MEMORY_MAX.name,
                },
            ));
        }
        let given = memory.len();
        let mut arena = Arena::new(memory);
        let account: &'static Memory = arena.one(Memory::new(platform, bound, given))?;
        arena.set_account(account);

        let selection = params.str(&BTL_SELECT);
        let mut chosen: Vec<&'static mut dyn Btl, MAX_BTLS> = Vec::new();
        if btl_selected(selection, "self") {
            let module = Loopback::new(&params, me, &mut arena)?;
            let lb = arena.one(module)?;
            let _ = chosen.push(lb);
        }
        for btl in btls {
            if btl_selected(selection, btl.attrs().component) {
                chosen.push(btl).map_err(|_| {
                    Error::exhausted("BTL modules", MAX_BTLS as u32, "(compile-time MAX_BTLS)")
                })?;
            }
        }
        if !selection.starts_with('^') {
            for name in selection
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
            {
                if !chosen.iter().any(|b| b.attrs().component == name) {
                    crate::log!(
                        platform,
                        Level::Warn,
                        "BTL component '{}' was requested but is not available here",
                        name
                    );
                }
            }
        }

        // Business cards.
        rte.modex_put("arch", &Arch::LOCAL.to_wire())?;
        for btl in chosen.iter_mut() {
            btl.publish(&mut RteModex(&mut *rte))?;
        }
        rte.modex_fence()?;
        let mut arch_err = None;
        let procs = arena.slice(n as usize, |p| PeerInfo {
            proc: ProcId(p as u32),
            arch: None,
            node: 0,
        })?;
        for info in procs.iter_mut() {
            let mut b = [0u8; 4];
            info.node = rte.node_of(info.proc);
            info.arch = match rte.modex_get(info.proc, "arch", &mut b)? {
                Some(4) => Arch::from_wire(b).ok(),
                _ => None,
            };
            if info.arch.is_none() && arch_err.is_none() {
                arch_err = Some(info.proc);
            }
        }
        if let Some(p) = arch_err {
            crate::log!(
                platform,
                Level::Warn,
                "process {} published no valid architecture descriptor",
                p.0
            );
        }
        let policy =
            crate::bml::StripePolicy::parse(params.str(&crate::bml::STRIPE)).ok_or(Error::new(
                ErrorClass::Arg,
                Reason::BadParam {
                    name: crate::bml::STRIPE.name,
                },
            ))?;
        let mut bml = Bml::new(chosen, n, policy, &mut arena)?;
        bml.add_procs(procs, &mut RteModex(&mut *rte))?;

        let comm_max = params.u32(&comm::COMM_MAX);
        let groups = GroupTable::new(
            &mut arena,
            params.u32(&group::GROUP_MAX),
            params.u32(&group::GROUP_MAX_MEMBERS),
            n,
        )?;
        let topos = TopoTable::new(
            &mut arena,
            params.u32(&topo::TOPO_MAX),
            params.u32(&topo::TOPO_MAX_INTS),
        )?;
        let mut comms = CommTable::new(&mut arena, comm_max, max_cids, groups, topos)?;
        let creation = comm::create::Scratch::new(&mut arena, n)?;
        let world = Comm {
            cid: ContextId(0),
            group: Group::World { size: n },
            remote: None,
            local_comm: None,
            hidden: false,
            topo: None,
            rank: me.0,
            errhandler: ErrHandler::Fatal,
            freed: false,
        };
        let selfc = Comm {
            cid: ContextId(1),
            group: Group::Single(me),
            remote: None,
            local_comm: None,
            hidden: false,
            topo: None,
            rank: 0,
            errhandler: ErrHandler::Fatal,
            freed: false,
        };
        comms.insert(world, Some(CommId::WORLD))?;
        comms.insert(selfc, Some(CommId::SELF))?;
        let types = TypeTable::new(&params, &mut arena)?;
        let objects = crate::objects::Objects::new(&params, &mut arena)?;
        let mut pml = Ob1::new(&params, &mut arena, n, comm_max, platform)?;
        match params.str(&pml::PML_SELECT).trim() {
            "ob1" => mtl = None,
            "cm" | "" => {}
            _ => {
                return Err(Error::new(
                    ErrorClass::Arg,
                    Reason::BadParam {
                        name: pml::PML_SELECT.name,
                    },
                ))
            }
        }
        match mtl {
            Some(m) => pml.use_mtl(m, procs, max_cids)?,
            None if params.str(&pml::PML_SELECT).trim() == "cm" => {
                return Err(Error::unsupported(
                    "pml cm: this platform has no matching transport (MTL); use pml ob1",
                ))
            }
            None => {}
        }
        for info in procs.iter() {
            if let Some(repr) = info.arch.and_then(Repr::of) {
                pml.set_repr(info.proc, repr);
            }
        }
        pml.comm_added(&comms, &types, CommId::WORLD);
        pml.comm_added(&comms, &types, CommId::SELF);
        let coll = crate::coll::CollState::new(&params, &mut arena)?;
        let uniform_arch = procs
            .iter()
            .all(|p| p.arch.is_some_and(|a| a.same_as(Arch::LOCAL)));
        Ok(Engine {
            coll,
            creation,
            platform,
            memory: account,
            rte,
            params,
            bml,
            pml,
            comms,
            types,
            objects,
            procs,
            uniform_arch,
            me,
            next_scope: 0,
            finalized: false,
            idle: 0,
            comms_draining: false,
        })
    }

    /// My rank in `MPI_COMM_WORLD`.
    pub fn rank(&self) -> u32 {
        self.me.0
    }

    /// Size of `MPI_COMM_WORLD`.
    pub fn size(&self) -> u32 {
        self.procs.len() as u32
    }

    /// The parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Info objects, attributes and names, user error handlers and codes.
    pub fn objects(&mut self) -> &mut crate::objects::Objects {
        &mut self.objects
    }

    /// Bytes the engine holds (its init region and every grant since) and its bound
    /// (`mpi_memory_max`).
    pub fn memory_held(&self) -> (usize, usize) {
        (self.memory.used(), self.memory.max())
    }

    /// The platform.
    pub fn platform(&self) -> &'static dyn Platform {
        self.platform
    }

    /// The PML's counters.
    pub fn stats(&self) -> pml::Stats {
        self.pml.stats
    }

    /// Requests in use (for leak checks).
    pub fn requests_in_use(&self) -> u32 {
        self.pml.requests_in_use()
    }

    /// The BTL modules in use.
    pub fn btls(&self) -> impl Iterator<Item = &dyn Btl> {
        self.bml.btls()
    }

    /// What is known about process `proc`.
    pub fn proc_info(&self, proc: ProcId) -> Option<&PeerInfo> {
        self.procs.get(proc.0 as usize)
    }

    /// Seconds since an arbitrary point (`MPI_Wtime`).
    pub fn wtime(&self) -> f64 {
        self.platform.now_ns() as f64 * 1e-9
    }

    /// Runs every BTL's progress and retries pending protocol work; returns how much happened.
    pub fn progress(&mut self) -> usize {
        let mut n = self.bml.progress(&mut Incoming {
            pml: &mut self.pml,
            comms: &self.comms,
            types: &self.types,
        });
        if let Some(peer) = self.pml.unreachable {
            self.peer_unreachable(peer);
        }
        n += self.pml.progress_work(&mut self.bml, &self.types);
        n += self.pml.progress_mtl(&self.types);
        n += self.coll_progress();
        n += self.idup_progress();
        if n > 0 {
            self.idle = 0;
        }
        n
    }

    /// Ends the job: a BTL lost the network to `peer`, so messages to and from it are gone and
    /// whoever waits for them would wait forever. Open MPI ends the job here too, whatever the
    /// error handler.
    #[cold]
    #[inline(never)]
    fn peer_unreachable(&mut self, peer: ProcId) -> ! {
        let mut msg: heapless::String<160> = heapless::String::new();
        let _ = write!(
            msg,
            "the network to rank {} failed (see the transport's message); messages to and from \
             it are lost, ending the job",
            peer.0
        );
        self.platform.log(Level::Error, format_args!("{msg}"));
        self.rte.abort(1, &msg)
    }

    /// Lets the core go for a moment after a round that moved nothing.
    pub fn relax(&mut self) {
        self.idle = self.idle.saturating_add(1);
        self.platform.relax(self.idle);
    }

    /// Counts an idle round for a caller that relaxes after releasing the engine: returns the
    /// platform and the idle count to pass to [`Platform::relax`].
    pub fn relax_count(&mut self) -> (&'static dyn Platform, u32) {
        self.idle = self.idle.saturating_add(1);
        (self.platform, self.idle)
    }

    /// Progresses until `done` says so, relaxing the core when nothing moves.
    pub fn progress_until(
        &mut self,
        mut done: impl FnMut(&mut Engine) -> Result<bool>,
    ) -> Result<()> {
        loop {
            if done(self)? {
                return Ok(());
            }
            if self.progress() == 0 {
                self.relax();
            }
        }
    }

    // ---- validation -------------------------------------------------------------------------

    pub(crate) fn check_comm(&self, comm: CommId) -> Result<&Comm> {
        if self.finalized {
            return Err(Error::new(ErrorClass::Other, Reason::NotInitialized));
        }
        self.comms.get(comm)
    }

    /// Checks a destination rank: `None` for `MPI_PROC_NULL`. The one look at the communicator
    /// also reads what a message to the rank carries, so a send over an MTL needs no second.
    /// Inlined: the caller then reads the result from registers, not from memory.
    #[inline(always)]
    fn check_dest(&self, comm: CommId, dest: i32) -> Result<Option<Dest>> {
        let c = self.check_comm(comm)?;
        if dest == PROC_NULL {
            return Ok(None);
        }
        let size = c.peers().size();
        if dest < 0 || dest as u32 >= size {
            return Err(Error::new(
                ErrorClass::Rank,
                Reason::RankOutOfRange { rank: dest, size },
            ));
        }
        let proc = self.comms.peer_proc(c, dest as u32);
        if !self.uniform_arch {
            self.check_arch(proc)?;
        }
        Ok(Some(Dest {
            rank: dest as u32,
            proc,
            ctx: c.cid.0,
            me: c.rank,
        }))
    }

    /// Checks a source selector: `None` for `MPI_PROC_NULL`.
    #[inline(always)]
    fn check_src(&self, comm: CommId, src: i32) -> Result<Option<Source>> {
        Ok(self.check_src_ctx(comm, src)?.map(|(s, _)| s))
    }

    /// [`Engine::check_src`] with the communicator's context id, read in the same look (what a
    /// receive over an MTL matches on). Inlined, as [`Engine::check_dest`].
    #[inline(always)]
    fn check_src_ctx(&self, comm: CommId, src: i32) -> Result<Option<(Source, u16)>> {
        let c = self.check_comm(comm)?;
        match src {
            PROC_NULL => Ok(None),
            ANY_SOURCE => Ok(Some((Source::Any, c.cid.0))),
            s if s >= 0 && (s as u32) < c.peers().size() => {
                if !self.uniform_arch {
                    self.check_arch(self.comms.peer_proc(c, s as u32))?;
                }
                Ok(Some((Source::Rank(s as u32), c.cid.0)))
            }
            s => Err(Error::new(
                ErrorClass::Rank,
                Reason::RankOutOfRange {
                    rank: s,
                    size: c.peers().size(),
                },
            )),
        }
    }

    fn check_send_tag(tag: i32) -> Result<()> {
        if !(0..=TAG_UB).contains(&tag) {
            return Err(Error::new(
                ErrorClass::Tag,
                Reason::TagOutOfRange { tag, ub: TAG_UB },
            ));
        }
        Ok(())
    }

    fn check_recv_tag(tag: i32) -> Result<TagSel> {
        if tag == ANY_TAG {
            return Ok(TagSel::Any);
        }
        Engine::check_send_tag(tag)?;
        Ok(TagSel::Tag(tag))
    }

    /// A peer of another architecture is served by converting its data (a `long double` in a
    /// format that cannot be converted is an error of the receive that meets it); one whose
    /// descriptor is missing or undecodable gets a clear error at its first message.
    #[inline(always)]
    fn check_arch(&self, proc: ProcId) -> Result<()> {
        if self.procs[proc.0 as usize]
            .arch
            .is_some_and(|a| a.same_as(Arch::LOCAL))
        {
            return Ok(());
        }
        self.check_other_arch(proc)
    }

    /// [`Engine::check_arch`] for a peer not like this process (out of line: rare).
    #[inline(never)]
    fn check_other_arch(&self, proc: ProcId) -> Result<()> {
        match self.procs[proc.0 as usize].arch.and_then(Repr::of) {
            None => Err(Error::unsupported(
                "communication with a process whose architecture descriptor is missing or unknown",
            )),
            Some(_) => Ok(()),
        }
    }

    /// Whether every member of `comm` stores data as this process does (then `MPI_Pack` may use
    /// the native form; otherwise it packs `external32`, which every member reads).
    pub fn comm_homogeneous(&self, comm: CommId) -> Result<bool> {
        let c = self.check_comm(comm)?;
        Ok([Some(c.group), c.remote].into_iter().flatten().all(|g| {
            self.comms.groups.members(g).all(|p| {
                self.procs[p.0 as usize]
                    .arch
                    .is_some_and(|a| a.same_as(Arch::LOCAL))
            })
        }))
    }

    /// The datatypes.
    pub fn types(&self) -> &TypeTable {
        &self.types
    }

    /// The datatypes, for constructors and frees.
    pub fn types_mut(&mut self) -> &mut TypeTable {
        &mut self.types
    }

    // ---- point-to-point -----------------------------------------------------------------------

    /// Starts a send of `conv`'s message (`MPI_Isend`, `MPI_Issend`, `MPI_Irsend`).
    pub fn isend(
        &mut self,
        conv: Packer,
        dest: i32,
        tag: i32,
        comm: CommId,
        mode: SendMode,
        scope: u32,
    ) -> Result<ReqId> {
        Engine::check_send_tag(tag)?;
        match self.check_dest(comm, dest)? {
            None => self.pml.completed(Status::PROC_NULL, scope),
            Some(d) => self.pml.isend(
                &mut self.bml,
                &self.comms,
                &self.types,
                conv,
                d.rank,
                tag,
                comm,
                mode,
                scope,
            ),
        }
    }

    /// [`Engine::isend`] of a message that is `data` as it stands (a predefined contiguous type
    /// in the user's buffer): over an MTL that copies it now, the request is complete from the
    /// start and no convertor is built or moved (a convertor is a few hundred bytes, moved
    /// through every layer on the general path); `make` builds it for every other case.
    #[allow(clippy::too_many_arguments)]
    pub fn isend_contiguous(
        &mut self,
        data: &[u8],
        make: impl FnOnce() -> Packer,
        dest: i32,
        tag: i32,
        comm: CommId,
        mode: SendMode,
        scope: u32,
    ) -> Result<ReqId> {
        Engine::check_send_tag(tag)?;
        let Some(d) = self.check_dest(comm, dest)? else {
            return self.pml.completed(Status::PROC_NULL, scope);
        };
        let conv = if mode != SendMode::Synchronous && self.pml.uses_mtl() {
            if self
                .pml
                .cm_send_bytes(&self.types, d.proc, d.envelope(tag), data)?
            {
                return self.pml.completed(Status::EMPTY, scope);
            }
            make()
        } else {
            // An eager message the route takes now is sent (copied) at once: the request is
            // complete from the start and carries no convertor.
            let mut conv = make();
            if self.ob1_send_now(&mut conv, &d, tag, comm, mode)? {
                return self.pml.completed(Status::EMPTY, scope);
            }
            conv
        };
        self.pml.isend(
            &mut self.bml,
            &self.comms,
            &self.types,
            conv,
            d.rank,
            tag,
            comm,
            mode,
            scope,
        )
    }

    /// Sends `conv` over ob1 at once if it is not synchronous, eager and its route has room;
    /// whether it did. With what the destination check read (no second look at the
    /// communicator). Not for the MTL path.
    #[inline(always)]
    fn ob1_send_now(
        &mut self,
        conv: &mut Packer,
        d: &Dest,
        tag: i32,
        comm: CommId,
        mode: SendMode,
    ) -> Result<bool> {
        if mode == SendMode::Synchronous {
            return Ok(false);
        }
        self.pml.send_now_to(
            &mut self.bml,
            &self.types,
            conv,
            comm,
            (d.ctx, d.me),
            (d.rank, d.proc),
            tag,
        )
    }

    /// Sends `conv`'s message and returns when the buffer may be reused (`MPI_Send`,
    /// `MPI_Ssend`).
    pub fn send(
        &mut self,
        conv: Packer,
        dest: i32,
        tag: i32,
        comm: CommId,
        mode: SendMode,
    ) -> Result<()> {
        self.send_with(|| conv, dest, tag, comm, mode)
    }

    /// [`Engine::send`] of the convertor `make` builds once the arguments are checked (built
    /// where it is used, not moved: a convertor is a few hundred bytes).
    #[inline]
    pub fn send_with(
        &mut self,
        make: impl FnOnce() -> Packer,
        dest: i32,
        tag: i32,
        comm: CommId,
        mode: SendMode,
    ) -> Result<()> {
        self.send_by(None, make, dest, tag, comm, mode)
    }

    /// [`Engine::send_with`] of a message that is `data` as it stands (a predefined contiguous
    /// type in the user's buffer): over an MTL that can copy it now it goes without a convertor;
    /// `make` builds the convertor for every other case.
    #[inline]
    pub fn send_contiguous(
        &mut self,
        data: &[u8],
        make: impl FnOnce() -> Packer,
        dest: i32,
        tag: i32,
        comm: CommId,
        mode: SendMode,
    ) -> Result<()> {
        self.send_by(Some(data), make, dest, tag, comm, mode)
    }

    /// The body of both: the message is `data` when given, else what `make` builds.
    #[inline(always)]
    fn send_by(
        &mut self,
        data: Option<&[u8]>,
        make: impl FnOnce() -> Packer,
        dest: i32,
        tag: i32,
        comm: CommId,
        mode: SendMode,
    ) -> Result<()> {
        Engine::check_send_tag(tag)?;
        let Some(d) = self.check_dest(comm, dest)? else {
            return Ok(());
        };
        if mode != SendMode::Synchronous && self.pml.uses_mtl() {
            // Straight to the MTL with the envelope the check read: no second look at the
            // communicator, no PML layers on the way.
            let env = d.envelope(tag);
            let conv = match data {
                Some(bytes) => {
                    if self.pml.cm_send_bytes(&self.types, d.proc, env, bytes)? {
                        return Ok(());
                    }
                    make()
                }
                None => {
                    let conv = make();
                    if self.pml.cm_send_env(&self.types, d.proc, env, &conv)? {
                        return Ok(());
                    }
                    conv
                }
            };
            return self.send_request(conv, d.rank, tag, comm, mode);
        }
        let mut conv = make();
        if self.ob1_send_now(&mut conv, &d, tag, comm, mode)? {
            return Ok(());
        }
        self.send_request(conv, d.rank, tag, comm, mode)
    }

    /// Sends with a library-internal (negative) tag, for collectives.
    pub(crate) fn send_internal(
        &mut self,
        conv: Packer,
        dest: u32,
        tag: i32,
        comm: CommId,
    ) -> Result<()> {
        self.send_to(|| conv, dest, tag, comm, SendMode::Standard)
    }

    /// Sends to the checked rank `d`: at once if the PML can, else through a request it waits
    /// for. Inlined, so the convertor is built where it is used.
    #[inline(always)]
    fn send_to(
        &mut self,
        make: impl FnOnce() -> Packer,
        d: u32,
        tag: i32,
        comm: CommId,
        mode: SendMode,
    ) -> Result<()> {
        let mut conv = make();
        if mode != SendMode::Synchronous
            && self.pml.send_now(
                &mut self.bml,
                &self.comms,
                &self.types,
                &mut conv,
                d,
                tag,
                comm,
            )?
        {
            return Ok(());
        }
        self.send_request(conv, d, tag, comm, mode)
    }

    /// Sends through a request the PML starts and this waits for (what cannot go at once).
    fn send_request(
        &mut self,
        conv: Packer,
        d: u32,
        tag: i32,
        comm: CommId,
        mode: SendMode,
    ) -> Result<()> {
        let id = self.pml.isend(
            &mut self.bml,
            &self.comms,
            &self.types,
            conv,
            d,
            tag,
            comm,
            mode,
            0,
        )?;
        self.wait(id).map(|_| ())
    }

    /// Receives with a library-internal (negative) tag, for collectives.
    pub(crate) fn recv_internal(
        &mut self,
        conv: Unpacker,
        src: u32,
        tag: i32,
        comm: CommId,
    ) -> Result<Status> {
        let id = self.irecv_internal(conv, src, tag, comm)?;
        let status = self.wait(id)?;
        match status.error {
            None => Ok(status),
            Some(e) => Err(e),
        }
    }

    /// Posts a receive with a library-internal (negative) tag.
    pub(crate) fn irecv_internal(
        &mut self,
        conv: Unpacker,
        src: u32,
        tag: i32,
        comm: CommId,
    ) -> Result<ReqId> {
        self.pml.irecv(
            &self.comms,
            &self.types,
            conv,
            Source::Rank(src),
            TagSel::Tag(tag),
            comm,
            0,
        )
    }

    /// Posts a receive from any source with a library-internal (negative) tag.
    pub(crate) fn irecv_internal_any(
        &mut self,
        conv: Unpacker,
        tag: i32,
        comm: CommId,
    ) -> Result<ReqId> {
        self.pml.irecv(
            &self.comms,
            &self.types,
            conv,
            Source::Any,
            TagSel::Tag(tag),
            comm,
            0,
        )
    }

    /// Posts a receive into `conv` (`MPI_Irecv`).
    pub fn irecv(
        &mut self,
        conv: Unpacker,
        src: i32,
        tag: i32,
        comm: CommId,
        scope: u32,
    ) -> Result<ReqId> {
        self.irecv_with(|| conv, src, tag, comm, scope)
    }

    /// [`Engine::irecv`] into the convertor `make` builds once the arguments are checked, built
    /// in the request's slot rather than moved there (a convertor is a few hundred bytes).
    #[inline]
    pub fn irecv_with(
        &mut self,
        make: impl FnOnce() -> Unpacker,
        src: i32,
        tag: i32,
        comm: CommId,
        scope: u32,
    ) -> Result<ReqId> {
        let tag = Engine::check_recv_tag(tag)?;
        match self.check_src(comm, src)? {
            None => self.pml.completed(Status::PROC_NULL, scope),
            Some(s) => self
                .pml
                .irecv_with(&self.comms, &self.types, make, s, tag, comm, scope),
        }
    }

    /// Receives into `conv` (`MPI_Recv`). A truncated message is an `MPI_ERR_TRUNCATE` error in
    /// the status.
    pub fn recv(&mut self, conv: Unpacker, src: i32, tag: i32, comm: CommId) -> Result<Status> {
        self.recv_with(|| conv, src, tag, comm)
    }

    /// [`Engine::recv`] into the convertor `make` builds, once the arguments are checked (where
    /// the receive keeps it, without moving it there: a convertor is a few hundred bytes).
    ///
    /// Over an MTL the receive needs no pooled request: it is posted as the PML's one blocking
    /// receive and waited for here.
    #[inline]
    pub fn recv_with(
        &mut self,
        make: impl FnOnce() -> Unpacker,
        src: i32,
        tag: i32,
        comm: CommId,
    ) -> Result<Status> {
        if self.pml.uses_mtl() && self.pml.cm_blocking_free() {
            let tag = Engine::check_recv_tag(tag)?;
            let Some((src, ctx)) = self.check_src_ctx(comm, src)? else {
                return Ok(Status::PROC_NULL);
            };
            let sel = MtlSelector { ctx, src, tag };
            self.pml.cm_recv_post(&self.types, make, sel)?;
            return self.wait_blocking();
        }
        let id = self.irecv_with(make, src, tag, comm, 0)?;
        self.wait(id)
    }

    /// Waits for the PML's blocking receive. Only the MTL can complete it, so a round polls the
    /// MTL alone, and every [`FULL_ROUND_EVERY`]th round is the whole progress round (BTLs,
    /// protocol work, collectives): the shorter round notices the message sooner, and the round
    /// that finds it returns without the rest (the MTL hands that completion straight back,
    /// [`crate::mtl::Mtl::progress_waiting`]). Counted in rounds, busy or not, so that a stream
    /// of other MTL traffic cannot hold the rest of progress off.
    #[inline(never)]
    fn wait_blocking(&mut self) -> Result<Status> {
        // Posting may have matched it at once (a message that was already here).
        if let Some(st) = self.pml.cm_recv_done() {
            return Ok(st);
        }
        let mut rounds = 0u32;
        loop {
            rounds = rounds.wrapping_add(1);
            let n = if rounds.is_multiple_of(FULL_ROUND_EVERY) {
                self.progress()
            } else {
                match self.pml.cm_wait_round(&self.types) {
                    pml::cm::WaitRound::Done(st) => {
                        // Something moved: the next wait starts spinning afresh, not yielding.
                        self.idle = 0;
                        return Ok(st);
                    }
                    pml::cm::WaitRound::Moved(n) => n,
                }
            };
            // Only a round that moved something can have finished it (through the sink).
            if n > 0 {
                self.idle = 0;
                if let Some(st) = self.pml.cm_recv_done() {
                    return Ok(st);
                }
            } else {
                self.relax();
            }
        }
    }

    /// Completes and frees request `id` if it is done (`MPI_Test`).
    pub fn test(&mut self, id: ReqId) -> Result<Option<Status>> {
        if let Some(s) = self.pml.test(id)? {
            return Ok(Some(s));
        }
        self.progress();
        self.pml.test(id)
    }

    /// Waits for request `id` and frees it (`MPI_Wait`). The status carries a truncation error.
    pub fn wait(&mut self, id: ReqId) -> Result<Status> {
        loop {
            if let Some(s) = self.pml.test(id)? {
                return Ok(s);
            }
            if self.progress() == 0 {
                self.relax();
            }
        }
    }

    /// Whether request `id` is complete, without freeing it.
    pub fn is_complete(&self, id: ReqId) -> Result<bool> {
        self.pml.is_complete(id)
    }

    /// A request that is already complete with `status` (e.g. a buffered send, whose data was
    /// copied).
    pub fn completed_request(&mut self, status: Status) -> Result<ReqId> {
        self.pml.completed(status, 0)
    }

    /// The live request in slot `index` (for handle tables that keep only part of the key).
    pub fn request_at(&self, index: u32) -> Option<ReqId> {
        self.pml.request_at(index)
    }

    /// The matched-probe message in slot `index`.
    pub fn message_at(&self, index: u32) -> Option<MsgId> {
        self.pml.message_at(index)
    }

    /// The communicator of a receive request.
    pub fn request_comm(&self, id: ReqId) -> Option<CommId> {
        self.pml.request_comm(id)
    }

    /// The job's size as the runtime knows it, and this process's application number.
    pub fn appnum(&self) -> Option<u32> {
        self.rte.appnum()
    }

    /// Cancels a pending receive (`MPI_Cancel`); sends are not cancellable and complete normally.
    pub fn cancel(&mut self, id: ReqId) -> Result<()> {
        self.pml.cancel(id)
    }

    /// Lets go of request `id` (`MPI_Request_free`).
    pub fn request_free(&mut self, id: ReqId) -> Result<()> {
        self.pml.release(id)
    }

    /// Checks for a matching message without receiving it (`MPI_Iprobe`).
    pub fn iprobe(&mut self, src: i32, tag: i32, comm: CommId) -> Result<Option<Status>> {
        let tag = Engine::check_recv_tag(tag)?;
        let Some(src) = self.check_src(comm, src)? else {
            return Ok(Some(Status::PROC_NULL));
        };
        if let Some(s) = self.pml.iprobe(&self.comms, src, tag, comm)? {
            return Ok(Some(s));
        }
        self.progress();
        self.pml.iprobe(&self.comms, src, tag, comm)
    }

    /// Waits for a matching message without receiving it (`MPI_Probe`).
    pub fn probe(&mut self, src: i32, tag: i32, comm: CommId) -> Result<Status> {
        loop {
            if let Some(s) = self.iprobe(src, tag, comm)? {
                return Ok(s);
            }
            self.relax();
        }
    }

    /// Takes a matching message for [`Engine::imrecv`] (`MPI_Improbe`); `Ok(Some((None, _)))` for
    /// `MPI_PROC_NULL` (`MPI_MESSAGE_NO_PROC`).
    pub fn improbe(
        &mut self,
        src: i32,
        tag: i32,
        comm: CommId,
    ) -> Result<Option<(Option<MsgId>, Status)>> {
        let tag = Engine::check_recv_tag(tag)?;
        let Some(src) = self.check_src(comm, src)? else {
            return Ok(Some((None, Status::PROC_NULL)));
        };
        if let Some((m, s)) = self.pml.improbe(&self.comms, src, tag, comm)? {
            return Ok(Some((Some(m), s)));
        }
        self.progress();
        Ok(self
            .pml
            .improbe(&self.comms, src, tag, comm)?
            .map(|(m, s)| (Some(m), s)))
    }

    /// Waits for and takes a matching message (`MPI_Mprobe`).
    pub fn mprobe(&mut self, src: i32, tag: i32, comm: CommId) -> Result<(Option<MsgId>, Status)> {
        loop {
            if let Some(r) = self.improbe(src, tag, comm)? {
                return Ok(r);
            }
            self.relax();
        }
    }

    /// Receives a message taken by a matched probe (`MPI_Imrecv`); `None` is `MPI_MESSAGE_NO_PROC`.
    pub fn imrecv(&mut self, conv: Unpacker, msg: Option<MsgId>, scope: u32) -> Result<ReqId> {
        match msg {
            None => self.pml.completed(Status::PROC_NULL, scope),
            Some(m) => self.pml.imrecv(&self.comms, &self.types, conv, m, scope),
        }
    }

    // ---- communicators ------------------------------------------------------------------------

    /// Communicator `id`.
    pub fn comm(&self, id: CommId) -> Result<&Comm> {
        self.check_comm(id)
    }

    /// The groups of the process.
    pub fn groups(&self) -> &GroupTable {
        &self.comms.groups
    }

    /// The groups of the process, to make and free them.
    pub fn groups_mut(&mut self) -> &mut GroupTable {
        &mut self.comms.groups
    }

    /// `MPI_Comm_compare`.
    pub fn comm_compare(&mut self, a: CommId, b: CommId) -> Result<CommSimilarity> {
        let (ca, cb) = (self.check_comm(a)?.clone(), self.check_comm(b)?.clone());
        if a == b {
            return Ok(CommSimilarity::Ident);
        }
        if ca.is_inter() != cb.is_inter() {
            return Ok(CommSimilarity::Unequal);
        }
        let g = &mut self.comms.groups;
        let local = g.compare(ca.group, cb.group);
        let remote = match (ca.remote, cb.remote) {
            (Some(x), Some(y)) => g.compare(x, y),
            _ => Similarity::Ident,
        };
        Ok(match (local, remote) {
            (Similarity::Ident, Similarity::Ident) => CommSimilarity::Congruent,
            (Similarity::Unequal, _) | (_, Similarity::Unequal) => CommSimilarity::Unequal,
            _ => CommSimilarity::Similar,
        })
    }

    /// Sets communicator `id`'s error handler.
    pub fn set_errhandler(&mut self, id: CommId, eh: ErrHandler) -> Result<()> {
        self.comms.get_mut(id)?.errhandler = eh;
        Ok(())
    }

    /// Frees communicator `id` (`MPI_Comm_free`). Receives still posted on it complete normally;
    /// its slot and context id are released once they have.
    pub fn comm_free(&mut self, id: CommId) -> Result<()> {
        // A communicator an MPI_Comm_idup is still making is freed when it is made.
        if self.comms.is_reserved(id) && self.idup_discard(id) {
            return Ok(());
        }
        let local = self.check_comm(id)?.local_comm;
        if id == CommId::WORLD || id == CommId::SELF {
            return Err(Error::new(
                ErrorClass::Comm,
                Reason::BadArgument {
                    what: "predefined communicators cannot be freed",
                },
            ));
        }
        // Done with its shared-memory collectives' cells (while its context id is still its).
        self.sm_release(id);
        if self.pml.comm_busy(id) || self.coll_uses(id) {
            self.comms.get_mut(id)?.freed = true;
            self.comms_draining = true;
        } else {
            self.pml.comm_removed(id);
            self.comms.remove(id)?;
        }
        if let Some(l) = local {
            self.comm_free(l)?;
        }
        // The hidden node levels go with it (every member frees them at the same call).
        if let Levels::Nodes { node, leaders, .. } = self.comms.levels(id) {
            // Non-blocking node-aware collectives still to start phases on them finish first.
            self.hier_drain(node, leaders);
            self.comms.set_levels(id, Levels::Flat);
            for c in leaders.into_iter().chain([node]) {
                self.comm_free(c)?;
            }
        }
        self.reap_comms();
        Ok(())
    }

    /// Releases freed communicators whose receives and non-blocking collectives have all
    /// completed.
    pub(crate) fn reap_comms(&mut self) {
        let mut cur = 0;
        loop {
            let Some(id) = self.comms.draining().find(|c| c.0 >= cur) else {
                break;
            };
            cur = id.0 + 1;
            if !self.pml.comm_busy(id) && !self.coll_uses(id) {
                self.pml.comm_removed(id);
                let _ = self.comms.remove(id);
            }
        }
        self.comms_draining = self.comms.draining().next().is_some();
    }

    // ---- scopes of the Rust API -------------------------------------------------------------------

    /// A new scope id for requests started inside one `scope` call of the Rust API.
    pub fn open_scope(&mut self) -> u32 {
        self.next_scope = self.next_scope.wrapping_add(1).max(1);
        self.next_scope
    }

    /// Waits for every request started in `scope` and frees them.
    pub fn close_scope(&mut self, scope: u32) {
        loop {
            let pending = self
                .pml
                .scope_requests(scope)
                .find(|id| !self.pml.is_complete(*id).unwrap_or(true));
            if pending.is_none() {
                break;
            }
            if self.progress() == 0 {
                self.relax();
            }
        }
        loop {
            let Some(id) = self.pml.scope_requests(scope).next() else {
                break;
            };
            let _ = self.pml.test(id);
        }
    }

    // ---- life cycle ---------------------------------------------------------------------------

    /// Whether [`Engine::finalize`] has run.
    pub fn is_finalized(&self) -> bool {
        self.finalized
    }

    /// Shuts down (`MPI_Finalize`): finishes outgoing protocol work, synchronises with every
    /// process so nothing is in flight, and leaves the runtime.
    pub fn finalize(&mut self) -> Result<()> {
        if self.finalized {
            return Err(Error::new(ErrorClass::Other, Reason::NotInitialized));
        }
        while self.pml.has_pending_work() {
            if self.progress() == 0 {
                self.relax();
            }
        }
        self.barrier(CommId::WORLD)?;
        self.finalized = true;
        self.bml.finalize();
        self.rte.finalize()
    }

    /// Ends the whole job (`MPI_Abort`).
    pub fn abort(&mut self, code: i32, msg: &str) -> ! {
        self.rte.abort(code, msg)
    }

    /// Writes the processor name into `out`; returns its length.
    pub fn processor_name(&self, out: &mut [u8]) -> usize {
        self.platform.processor_name(out)
    }
}

#[cfg(test)]
mod tests {
    use super::btl_selected;

    #[test]
    fn btl_selection_lists() {
        assert!(btl_selected("", "tcp"));
        assert!(btl_selected("sm,self", "self"));
        assert!(!btl_selected("sm,self", "tcp"));
        assert!(btl_selected(" sm , tcp ", "tcp"));
        assert!(!btl_selected("^tcp", "tcp"));
        assert!(btl_selected("^tcp,sm", "self"));
    }
}
