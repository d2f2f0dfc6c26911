//! The engine: one process's MPI state, and the progress loop.
//!
//! [`Engine::new`] takes what the platform hands over — memory for every pool, its services, its
//! runtime and its BTL modules — exchanges business cards through the modex, builds the routes to
//! every peer and the predefined communicators. After that nothing is allocated.
//!
//! Point-to-point lives in [`P2p`]; the engine adds collectives, communicator construction,
//! the MPI layer's user state and the runtime, and runs everyone's progress. Blocking operations
//! wait through [`Inside`] (see [`crate::shared`]), which lets other threads in between rounds;
//! the blocking methods here are for a single-threaded owner of the engine (tests, drivers).

use core::fmt::Write as _;
use core::mem::MaybeUninit;

use heapless::Vec;

use crate::arch::Arch;
use crate::arena::{Arena, Sizer};
use crate::bml::{Bml, MAX_BTLS};
use crate::btl::loopback::{self, Loopback};
use crate::btl::{Btl, Modex, ModexPut, PeerInfo};
use crate::comm::{self, Comm, CommId, CommSimilarity, CommTable, ContextId, ErrHandler};
use crate::datatype::convertor::{Packer, Unpacker};
use crate::datatype::table::TypeTable;
use crate::error::{Allowed, Error, ErrorClass, Reason, Result};
use crate::group::{self, Group, GroupTable, Similarity};
use crate::memory::Memory;
use crate::p2p::{Bytes, Make, P2p, Posted, RecvData, RecvRound, SendData};
use crate::params::{Default, Kind, ParamDef, Params};
use crate::platform::{Level, Platform};
use crate::pml::request::{ReqId, SendMode, Source, Status};
use crate::pml::{self, Cm, MsgId, Ob1, Pml};
use crate::rte::{ProcId, Rte};
use crate::shared::{Inside, FULL_ROUND_EVERY};
use crate::topo::{self, TopoTable};

/// `btl`: which BTL components to use.
pub static BTL_SELECT: ParamDef = ParamDef {
    name: "btl",
    kind: Kind::Str,
    default: Default::Str(""),
    description:
        "BTL components to use, e.g. 'sm,self'; '^tcp' excludes; empty means all available",
};

/// `dpm_max_procs`: process slots kept for processes of other jobs.
pub static DPM_MAX_PROCS: ParamDef = ParamDef {
    name: "dpm_max_procs",
    kind: Kind::Int {
        min: 0,
        max: 1 << 20,
    },
    default: Default::Int(64),
    description: "Processes of other jobs (MPI_Comm_connect/accept, spawn) one process can reach \
                  over its life; their slots are reserved at init",
};

/// `dpm_timeout`: how long connecting to another job may take.
pub static DPM_TIMEOUT: ParamDef = ParamDef {
    name: "dpm_timeout",
    kind: Kind::Int {
        min: 1,
        max: 1 << 30,
    },
    default: Default::Int(600),
    description: "Seconds MPI_Comm_accept waits for the other job, and each step of meeting it \
                  (connect, card exchange) may take",
};

/// Every parameter the core registers.
pub fn core_params() -> impl Iterator<Item = &'static ParamDef> {
    [&BTL_SELECT, &DPM_MAX_PROCS, &DPM_TIMEOUT]
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
        .chain(crate::io::PARAMS)
        .chain(crate::memory::PARAMS)
}

/// How full the engine's main pools are: for each, (in use, slots held now, most slots).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Requests.
    pub requests: (u32, u32, u32),
    /// Datatypes (predefined ones included).
    pub types: (u32, u32, u32),
    /// Communicators.
    pub comms: (u32, u32, u32),
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
    /// Point-to-point: the PML, the BML, communicators and datatypes.
    pub p2p: P2p,
    /// Info objects, attributes and names, user error handlers (the MPI layer's user state).
    pub(crate) objects: crate::objects::Objects,
    /// Consecutive progress rounds that moved nothing (for the platform's relax policy).
    pub(crate) idle: u32,
    /// The last progress round moved something.
    pub(crate) moved: bool,
    /// Some freed communicator waits for its receives or collectives to end.
    pub(crate) comms_draining: bool,
    /// Collectives: non-blocking ones in flight, scratch, user-defined operations.
    pub(crate) coll: crate::coll::CollState,
    /// Memory for building communicators.
    pub(crate) creation: comm::create::Scratch,
    /// One-sided communication: the windows.
    pub(crate) osc: crate::osc::Osc,
    /// Open MPI files.
    pub(crate) io: crate::io::Files,
    /// Partitioned point-to-point requests.
    pub(crate) part: crate::part::Parts,
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
        // Per-process state covers the slots of processes that join later too.
        let procs = procs.saturating_add(params.u32(&DPM_MAX_PROCS));
        let mut s = Sizer::default();
        s.slice::<Memory>(1);
        let comms = comm::comm_limit(params);
        let (mut ob1, mut cm) = (Sizer::default(), Sizer::default());
        Ob1::size(params, &mut ob1, procs, comms);
        Cm::size(params, &mut cm, comms);
        s.bytes_of(ob1.bytes().max(cm.bytes()));
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
        crate::io::Files::size(params, &mut s);
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
        let slots = n.saturating_add(params.u32(&DPM_MAX_PROCS));
        let max_cids = params.u32(&comm::MAX_CIDS);
        if !max_cids.is_multiple_of(64) {
            return Err(
                comm::MAX_CIDS.refused_with(Allowed::Text("a multiple of 64 from 64 to 65472"))
            );
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
        // Slots from `n` on wait for processes of other jobs (see `add_procs`).
        let procs = arena.slice(slots as usize, |p| PeerInfo {
            proc: ProcId(p as u32),
            arch: None,
            node: crate::p2p::FREE_SLOT,
        })?;
        for info in procs[..n as usize].iter_mut() {
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
        let policy = crate::bml::StripePolicy::parse(params.str(&crate::bml::STRIPE))
            .ok_or(crate::bml::STRIPE.refused_with(Allowed::Text("auto, always or never")))?;
        let mut bml = Bml::new(chosen, slots, policy, &mut arena)?;
        bml.add_procs(&procs[..n as usize], &mut RteModex(&mut *rte))?;

        let comm_max = comm::comm_limit(&params);
        let groups = GroupTable::with_slots(
            &mut arena,
            params.u32(&group::GROUP_MAX),
            params.u32(&group::GROUP_MAX_MEMBERS),
            n,
            slots,
        )?;
        let topos = TopoTable::new(
            &mut arena,
            params.u32(&topo::TOPO_MAX),
            params.u32(&topo::TOPO_MAX_INTS),
        )?;
        let mut comms = CommTable::new(&mut arena, comm_max, max_cids, groups, topos)?;
        let creation = comm::create::Scratch::new(&mut arena, slots)?;
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
            hints: crate::comm::CommHints::empty(),
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
            hints: crate::comm::CommHints::empty(),
        };
        comms.insert(world, Some(CommId::WORLD))?;
        comms.insert(selfc, Some(CommId::SELF))?;
        let types = TypeTable::new(&params, &mut arena)?;
        let objects = crate::objects::Objects::new(&params, &mut arena)?;
        let io = crate::io::Files::new(&params, &mut arena)?;
        match params.str(&pml::PML_SELECT).trim() {
            "ob1" => mtl = None,
            "cm" | "" => {}
            _ => return Err(pml::PML_SELECT.refused_with(Allowed::Text("ob1 or cm"))),
        }
        let mut pml = match mtl {
            Some(m) => Pml::Cm(Cm::new(
                &params,
                &mut arena,
                comm_max,
                m,
                &procs[..n as usize],
                max_cids,
            )?),
            None if params.str(&pml::PML_SELECT).trim() == "cm" => {
                return Err(Error::unsupported(
                    "pml cm: this platform has no matching transport (MTL); use pml ob1",
                ))
            }
            None => Pml::Ob1(Ob1::new(&params, &mut arena, slots, comm_max, platform)?),
        };
        pml.comm_added(&comms, &types, CommId::WORLD)?;
        pml.comm_added(&comms, &types, CommId::SELF)?;
        let coll = crate::coll::CollState::new(&params, &mut arena)?;
        Ok(Engine {
            coll,
            creation,
            platform,
            memory: account,
            osc: crate::osc::Osc::new(account),
            part: crate::part::Parts::new(account),
            rte,
            params,
            p2p: P2p::new(pml, bml, comms, types, procs, n, me),
            objects,
            idle: 0,
            moved: false,
            comms_draining: false,
            io,
        })
    }

    /// My rank in `MPI_COMM_WORLD`.
    pub fn rank(&self) -> u32 {
        self.p2p.me.0
    }

    /// Size of `MPI_COMM_WORLD`.
    pub fn size(&self) -> u32 {
        self.p2p.world
    }

    /// The slots the next processes of another job take: after giving back those no
    /// communicator reaches any more, the start and length of the longest run of free ones.
    pub fn free_slots(&mut self) -> (u32, u32) {
        self.p2p.release_unreached();
        self.p2p.free_slots()
    }

    /// Writes this process's business card for processes of another job
    /// ([`crate::dpm::Card`]) into `out`, announcing that its side gives their members slots
    /// from `base` on; returns its length.
    pub fn write_card(&mut self, base: u32, out: &mut [u8]) -> Result<usize> {
        let mut host = [0u8; crate::dpm::MAX_HOST];
        let hl = self.platform.processor_name(&mut host);
        let mut w =
            crate::dpm::CardWriter::new(out, self.p2p.me.0, base, Arch::LOCAL, &host[..hl])?;
        for b in 0..self.p2p.bml.btls().count() {
            self.p2p.bml.btl(b as u8).card(&mut w)?;
        }
        Ok(w.len())
    }

    /// Adds the processes of another job whose `cards` arrived (in the order of their slots,
    /// from `first` on, which this process announced from [`Engine::free_slots`]): each gets
    /// a process slot, and the BTLs decide which reach it ([`crate::btl::Btl::add_later`]).
    /// `my_index` is this process's index among its own side's cards; `secret` the link's,
    /// which their transports prove. Returns the first new slot. The slots are bounded by
    /// `dpm_max_procs`; they are given back once no communicator reaches their processes.
    pub fn add_procs(
        &mut self,
        first: u32,
        cards: crate::dpm::Cards<'_>,
        my_index: u32,
        secret: [u8; 32],
    ) -> Result<ProcId> {
        let k = cards.len();
        let end = first as usize + k as usize;
        if !self.p2p.slots_free(first, end as u32) {
            return Err(Error::exhausted(
                "process slots for processes of other jobs",
                self.params.u32(&DPM_MAX_PROCS),
                DPM_MAX_PROCS.name,
            ));
        }
        if !matches!(self.p2p.pml, Pml::Ob1(_)) {
            return Err(Error::unsupported(
                "processes of other jobs under pml cm (use pml ob1)",
            ));
        }
        for i in 0..k {
            let card = cards
                .get(i)
                .ok_or(Error::bad_arg("a business card does not parse"))?;
            let slot = first + i;
            // Their own node number: node-aware code treats each as a node of its own.
            self.p2p.procs[slot as usize] = PeerInfo {
                proc: ProcId(slot),
                arch: card.arch,
                node: 0x4000_0000 | slot,
            };
        }
        let mut host = [0u8; crate::dpm::MAX_HOST];
        let hl = self.platform.processor_name(&mut host);
        let mut modex = crate::dpm::CardModex {
            cards,
            first: ProcId(first),
            my_index,
            secret,
            host: &host[..hl],
        };
        // The slots are taken even if a module fails: the other side counts on the same ids.
        self.p2p.joined = self.p2p.joined.max(end as u32);
        self.p2p
            .bml
            .add_later(&self.p2p.procs[first as usize..end], &mut modex)?;
        self.p2p.joined_procs(first, end as u32);
        for slot in first..end as u32 {
            self.p2p.bml.reachable(ProcId(slot))?;
        }
        Ok(ProcId(first))
    }

    /// The parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Whether parameter `name` may change after init: the engine reads it at every call
    /// (the collective algorithm choices), rather than sizing or wiring something by it once.
    pub fn param_settable(name: &str) -> bool {
        crate::coll::ALGORITHMS.iter().any(|(d, _)| d.name == name)
    }

    /// Sets parameter `name` from `text` at run time (for the tools interface), where
    /// [`Engine::param_settable`] allows it; the change applies from the next call on.
    pub fn set_param(&mut self, name: &str, text: &str) -> Result<()> {
        let Some((def, names)) = crate::coll::ALGORITHMS.iter().find(|(d, _)| d.name == name)
        else {
            return Err(Error::bad_arg(
                "this parameter is fixed at MPI_Init and cannot change after it",
            ));
        };
        if crate::coll::choice(text, names).is_none() {
            return Err(def.refused_with(Allowed::Text(def.description)));
        }
        self.params.set(name, text)?;
        self.coll.retune(&self.params)
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
        self.p2p.pml.stats()
    }

    /// Use of the engine's main pools against their room, for the tools interface.
    pub fn usage(&self) -> Usage {
        let r = &self.p2p.pml.requests().pool;
        let c = &self.p2p.comms;
        Usage {
            requests: (r.len(), r.capacity(), r.max()),
            types: self.p2p.types.usage(),
            comms: (c.count() as u32, c.capacity(), c.max()),
        }
    }

    /// Requests in use (for leak checks).
    pub fn requests_in_use(&self) -> u32 {
        self.p2p.pml.requests().len()
    }

    /// The BTL modules in use.
    pub fn btls(&self) -> impl Iterator<Item = &dyn Btl> {
        self.p2p.bml.btls()
    }

    /// What is known about process `proc`.
    pub fn proc_info(&self, proc: ProcId) -> Option<&PeerInfo> {
        self.p2p.procs.get(proc.0 as usize)
    }

    /// Seconds since an arbitrary point (`MPI_Wtime`).
    pub fn wtime(&self) -> f64 {
        self.platform.now_ns() as f64 * 1e-9
    }

    /// The collectives, with point-to-point borrowed.
    #[inline]
    pub(crate) fn colls(&mut self) -> crate::coll::Colls<'_> {
        crate::coll::Colls {
            p2p: &mut self.p2p,
            coll: &mut self.coll,
        }
    }

    /// Communicator construction that runs without waiting (idup, freeing).
    #[inline]
    pub(crate) fn building(&mut self) -> comm::create::Building<'_> {
        comm::create::Building {
            p2p: &mut self.p2p,
            coll: &mut self.coll,
            creation: &mut self.creation,
            draining: &mut self.comms_draining,
        }
    }

    /// Runs point-to-point progress (every BTL, pending protocol work or the MTL), the
    /// non-blocking collectives and communicator duplications; returns how much happened.
    pub fn progress(&mut self) -> usize {
        let mut n = self.p2p.progress();
        if let Some(peer) = self.p2p.pml.unreachable() {
            self.peer_unreachable(peer);
        }
        let finished = self.colls().coll_progress();
        if finished > 0 && self.comms_draining {
            // A communicator freed while they ran may go now.
            self.building().reap();
        }
        n += finished;
        n += self.building().idup_progress();
        n += self.osc.progress(&mut self.p2p, self.platform);
        n += self.part.progress(&mut self.p2p);
        n += crate::io::background::progress(self);
        // MPI_Isendrecv's requests, once their parts are done.
        self.p2p.pml.requests_mut().joined_progress();
        self.moved = n > 0;
        if n > 0 {
            self.idle = 0;
        }
        n
    }

    /// After a polling call (`MPI_Iprobe`) found nothing: relaxes as an idle wait round does if
    /// its progress moved nothing (see [`Inside::polled_idle`]).
    pub fn polled_idle(&mut self) {
        if !self.moved {
            self.relax();
        }
    }

    /// Ends the job: a BTL lost the network to `peer`, so messages to and from it are gone and
    /// whoever waits for them would wait forever. Open MPI ends the job here too, whatever the
    /// error handler.
    #[cold]
    #[inline(never)]
    fn peer_unreachable(&mut self, peer: ProcId) -> ! {
        let mut msg: heapless::String<200> = heapless::String::new();
        let world = self.rte.size();
        let _ = if peer.0 < world {
            write!(
                msg,
                "the network to rank {} failed (see the transport's message); messages to and \
                 from it are lost, ending the job",
                peer.0
            )
        } else {
            write!(
                msg,
                "the network to process {} of another job (joined by connect/accept or spawn) \
                 failed (see the transport's message); messages to and from it are lost, ending \
                 the job",
                peer.0
            )
        };
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
        Inside::of(self).block(|e| Ok(done(e)?.then_some(())))
    }

    /// Communicator `comm`, if it is live (and MPI is).
    pub(crate) fn check_comm(&self, comm: CommId) -> Result<&Comm> {
        self.p2p.comm(comm)
    }

    /// Whether every member of `comm` stores data as this process does.
    pub fn comm_homogeneous(&self, comm: CommId) -> Result<bool> {
        self.p2p.comm_homogeneous(comm)
    }

    /// The datatypes.
    pub fn types(&self) -> &TypeTable {
        &self.p2p.types
    }

    /// The datatypes, for constructors and frees.
    pub fn types_mut(&mut self) -> &mut TypeTable {
        &mut self.p2p.types
    }

    // ---- point-to-point, for a single-threaded owner ------------------------------------------

    /// Starts a send of `conv`'s message (`MPI_Isend`, `MPI_Issend`, `MPI_Irsend`).
    pub fn isend(
        &mut self,
        conv: impl SendData,
        dest: i32,
        tag: i32,
        comm: CommId,
        mode: SendMode,
        scope: u32,
    ) -> Result<ReqId> {
        match self.p2p.check_send(comm, dest, tag)? {
            None => self
                .p2p
                .pml
                .requests_mut()
                .completed(Status::PROC_NULL, scope),
            Some(d) => self.p2p.isend(&d, tag, conv, mode, scope),
        }
    }

    /// [`Engine::isend`] of a message that is `data` as it stands: a path that takes the bytes
    /// (an MTL that copies them now, an eager message) needs no convertor; `make` builds it for
    /// every other case.
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
        match self.p2p.check_send(comm, dest, tag)? {
            None => self
                .p2p
                .pml
                .requests_mut()
                .completed(Status::PROC_NULL, scope),
            Some(d) => self.p2p.isend(&d, tag, Bytes { data, make }, mode, scope),
        }
    }

    /// [`Engine::irecv`] into the convertor `make` builds in the request's slot.
    pub fn irecv_with(
        &mut self,
        make: impl FnOnce() -> Unpacker,
        src: i32,
        tag: i32,
        comm: CommId,
        scope: u32,
    ) -> Result<ReqId> {
        match self.p2p.check_recv(comm, src, tag)? {
            None => self
                .p2p
                .pml
                .requests_mut()
                .completed(Status::PROC_NULL, scope),
            Some(s) => self.p2p.irecv(&s, Make(make), scope),
        }
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
        Inside::of(self).send(conv, dest, tag, comm, mode)
    }

    /// Posts a receive with a library-internal (negative) tag.
    pub(crate) fn irecv_internal(
        &mut self,
        conv: Unpacker,
        src: u32,
        tag: i32,
        comm: CommId,
    ) -> Result<ReqId> {
        let s = self.p2p.sel(comm, Source::Rank(src), tag)?;
        self.p2p.irecv(&s, conv, 0)
    }

    /// Posts a receive from any source with a library-internal (negative) tag.
    pub(crate) fn irecv_internal_any(
        &mut self,
        conv: Unpacker,
        tag: i32,
        comm: CommId,
    ) -> Result<ReqId> {
        let s = self.p2p.sel(comm, Source::Any, tag)?;
        self.p2p.irecv(&s, conv, 0)
    }

    /// Posts a receive into `conv` (`MPI_Irecv`).
    pub fn irecv(
        &mut self,
        conv: impl RecvData,
        src: i32,
        tag: i32,
        comm: CommId,
        scope: u32,
    ) -> Result<ReqId> {
        match self.p2p.check_recv(comm, src, tag)? {
            None => self
                .p2p
                .pml
                .requests_mut()
                .completed(Status::PROC_NULL, scope),
            Some(s) => self.p2p.irecv(&s, conv, scope),
        }
    }

    /// Receives into `conv` (`MPI_Recv`). A truncated message is an `MPI_ERR_TRUNCATE` error in
    /// the status.
    pub fn recv(&mut self, conv: Unpacker, src: i32, tag: i32, comm: CommId) -> Result<Status> {
        let Some(s) = self.p2p.check_recv(comm, src, tag)? else {
            return Ok(Status::PROC_NULL);
        };
        let r = self.p2p.recv(&s, conv)?;
        Inside::of(self).wait_recv(r)
    }

    /// Completes and frees request `id` if it is done (`MPI_Test`).
    pub fn test(&mut self, id: ReqId) -> Result<Option<Status>> {
        if let Some(s) = self.p2p.pml.requests_mut().test(id)? {
            return Ok(Some(s));
        }
        self.progress();
        self.p2p.pml.requests_mut().test(id)
    }

    /// Waits for request `id` and frees it (`MPI_Wait`). The status carries a truncation error.
    pub fn wait(&mut self, id: ReqId) -> Result<Status> {
        Inside::of(self).wait(id)
    }

    /// Whether request `id` is complete, without freeing it.
    pub fn is_complete(&self, id: ReqId) -> Result<bool> {
        self.p2p.pml.requests().is_complete(id)
    }

    /// A request that is already complete with `status` (e.g. a buffered send, whose data was
    /// copied).
    pub fn completed_request(&mut self, status: Status) -> Result<ReqId> {
        self.p2p.pml.requests_mut().completed(status, 0)
    }

    /// The live request in slot `index` (for handle tables that keep only part of the key).
    pub fn request_at(&self, index: u32) -> Option<ReqId> {
        self.p2p.pml.requests().at(index)
    }

    /// The matched-probe message in slot `index`.
    pub fn message_at(&self, index: u32) -> Option<MsgId> {
        self.p2p.pml.message_at(index)
    }

    /// The communicator of a receive request.
    pub fn request_comm(&self, id: ReqId) -> Option<CommId> {
        self.p2p.pml.requests().comm_of(id)
    }

    /// The job's size as the runtime knows it, and this process's application number.
    pub fn appnum(&self) -> Option<u32> {
        self.rte.appnum()
    }

    /// Publishes `port` under `service` through the runtime's name service.
    pub fn publish_name(&mut self, service: &str, port: &str) -> Result<()> {
        self.rte.publish_name(service, port)
    }

    /// The port published under `service`, copied into `out`; returns its length.
    pub fn lookup_name(&mut self, service: &str, out: &mut [u8]) -> Result<usize> {
        self.rte.lookup_name(service, out)
    }

    /// Withdraws `service` from the runtime's name service.
    pub fn unpublish_name(&mut self, service: &str) -> Result<()> {
        self.rte.unpublish_name(service)
    }

    /// The runtime, with the info objects a spawn request reads at the same time.
    pub(crate) fn rte_with_infos(&mut self) -> (&mut dyn Rte, &crate::info::InfoTable) {
        (&mut *self.rte, &self.objects.infos)
    }

    /// For a spawned process: the port its parents wait at, copied into `out` (see
    /// [`Rte::parent_port`]).
    pub fn parent_port(&self, out: &mut [u8]) -> Option<usize> {
        self.rte.parent_port(out)
    }

    /// Cancels a pending receive (`MPI_Cancel`); sends are not cancellable and complete normally.
    pub fn cancel(&mut self, id: ReqId) -> Result<()> {
        self.p2p.pml.cancel(id)
    }

    /// Lets go of request `id` (`MPI_Request_free`).
    pub fn request_free(&mut self, id: ReqId) -> Result<()> {
        self.p2p.pml.requests_mut().release(id)
    }

    /// Checks for a matching message without receiving it (`MPI_Iprobe`).
    pub fn iprobe(&mut self, src: i32, tag: i32, comm: CommId) -> Result<Option<Status>> {
        let Some(s) = self.p2p.check_recv(comm, src, tag)? else {
            return Ok(Some(Status::PROC_NULL));
        };
        if let Some(st) = self.p2p.iprobe(&s)? {
            return Ok(Some(st));
        }
        self.progress();
        self.p2p.iprobe(&s)
    }

    /// Waits for a matching message without receiving it (`MPI_Probe`).
    pub fn probe(&mut self, src: i32, tag: i32, comm: CommId) -> Result<Status> {
        Inside::of(self).probe(src, tag, comm)
    }

    /// Takes a matching message for [`Engine::imrecv`] (`MPI_Improbe`); `Ok(Some((None, _)))` for
    /// `MPI_PROC_NULL` (`MPI_MESSAGE_NO_PROC`).
    pub fn improbe(
        &mut self,
        src: i32,
        tag: i32,
        comm: CommId,
    ) -> Result<Option<(Option<MsgId>, Status)>> {
        let Some(s) = self.p2p.check_recv(comm, src, tag)? else {
            return Ok(Some((None, Status::PROC_NULL)));
        };
        if let Some((m, st)) = self.p2p.improbe(&s)? {
            return Ok(Some((Some(m), st)));
        }
        self.progress();
        Ok(self.p2p.improbe(&s)?.map(|(m, st)| (Some(m), st)))
    }

    /// Waits for and takes a matching message (`MPI_Mprobe`).
    pub fn mprobe(&mut self, src: i32, tag: i32, comm: CommId) -> Result<(Option<MsgId>, Status)> {
        Inside::of(self).mprobe(src, tag, comm)
    }

    /// Receives a message taken by a matched probe (`MPI_Imrecv`); `None` is `MPI_MESSAGE_NO_PROC`.
    pub fn imrecv(&mut self, conv: Unpacker, msg: Option<MsgId>, scope: u32) -> Result<ReqId> {
        match msg {
            None => self
                .p2p
                .pml
                .requests_mut()
                .completed(Status::PROC_NULL, scope),
            Some(m) => self.p2p.imrecv(m, conv, scope),
        }
    }

    // ---- communicators ------------------------------------------------------------------------

    /// Communicator `id`.
    pub fn comm(&self, id: CommId) -> Result<&Comm> {
        self.check_comm(id)
    }

    /// The groups of the process.
    pub fn groups(&self) -> &GroupTable {
        &self.p2p.comms.groups
    }

    /// The groups of the process, to make and free them.
    pub fn groups_mut(&mut self) -> &mut GroupTable {
        &mut self.p2p.comms.groups
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
        let g = &mut self.p2p.comms.groups;
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
        self.p2p.comms.set_errhandler(id, eh)
    }

    /// Blocks until every member of `comm` has called it (`MPI_Barrier`).
    pub fn barrier(&mut self, comm: CommId) -> Result<()> {
        crate::coll::barrier(&mut Inside::of(self), comm)
    }

    /// Frees communicator `id` (`MPI_Comm_free`): see [`comm::create::free`].
    pub fn comm_free(&mut self, id: CommId) -> Result<()> {
        comm::create::free(&mut Inside::of(self), id)
    }

    // ---- scopes of the Rust API -------------------------------------------------------------------

    /// A new scope id for requests started inside one `scope` call of the Rust API.
    pub fn open_scope(&mut self) -> u32 {
        self.p2p.pml.requests_mut().open_scope()
    }

    /// Waits for every request started in `scope` and frees them.
    pub fn close_scope(&mut self, scope: u32) {
        let _ = Inside::of(self).close_scope(scope);
    }

    // ---- life cycle ---------------------------------------------------------------------------

    /// Whether [`Engine::finalize`] has run.
    pub fn is_finalized(&self) -> bool {
        self.p2p.finalized
    }

    /// Shuts down (`MPI_Finalize`): finishes outgoing protocol work, synchronises with every
    /// process so nothing is in flight, and leaves the runtime.
    pub fn finalize(&mut self) -> Result<()> {
        Inside::of(self).finalize()
    }

    /// Leaves the transports and the runtime, once everything is done (the end of
    /// [`Inside::finalize`]).
    pub(crate) fn shut_down(&mut self) -> Result<()> {
        self.p2p.finalized = true;
        self.p2p.bml.finalize();
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

impl Inside<'_> {
    /// Waits for a matching message without receiving it (`MPI_Probe`).
    pub fn probe(&mut self, src: i32, tag: i32, comm: CommId) -> Result<Status> {
        let Some(s) = self.e().p2p.check_recv(comm, src, tag)? else {
            return Ok(Status::PROC_NULL);
        };
        self.probe_with(|p2p| p2p.iprobe(&s))
    }

    /// Waits for and takes a matching message (`MPI_Mprobe`); `None` is `MPI_MESSAGE_NO_PROC`.
    pub fn mprobe(&mut self, src: i32, tag: i32, comm: CommId) -> Result<(Option<MsgId>, Status)> {
        let Some(s) = self.e().p2p.check_recv(comm, src, tag)? else {
            return Ok((None, Status::PROC_NULL));
        };
        self.probe_with(|p2p| Ok(p2p.improbe(&s)?.map(|(m, st)| (Some(m), st))))
    }

    /// The probes' wait: a look at what has come, then rounds of progress each followed by a
    /// look (one look and one progress per round: a round's look serves the next round too).
    fn probe_with<T>(&mut self, mut look: impl FnMut(&mut P2p) -> Result<Option<T>>) -> Result<T> {
        self.share();
        loop {
            if let Some(t) = look(&mut self.e().p2p)? {
                return Ok(t);
            }
            self.round();
        }
    }

    /// Sends `conv`'s message to rank `dest` of `comm` and returns when the buffer may be
    /// reused (`MPI_Send`, `MPI_Ssend`).
    pub fn send(
        &mut self,
        conv: Packer,
        dest: i32,
        tag: i32,
        comm: CommId,
        mode: SendMode,
    ) -> Result<()> {
        let e = self.e();
        let Some(d) = e.p2p.check_send(comm, dest, tag)? else {
            return Ok(());
        };
        match e.p2p.send(&d, tag, conv, mode, 0)? {
            None => Ok(()),
            Some(id) => self.wait(id).map(|_| ()),
        }
    }

    /// Sends with a library-internal (negative) tag, for collectives and construction.
    pub(crate) fn send_internal(
        &mut self,
        conv: Packer,
        dest: u32,
        tag: i32,
        comm: CommId,
    ) -> Result<()> {
        let e = self.e();
        let d = e.p2p.dest(comm, dest)?;
        match e.p2p.send(&d, tag, conv, SendMode::Standard, 0)? {
            None => Ok(()),
            Some(id) => self.wait(id).map(|_| ()),
        }
    }

    /// Receives with a library-internal (negative) tag, for collectives and construction; an
    /// error in the status is the result's.
    pub(crate) fn recv_internal(
        &mut self,
        conv: Unpacker,
        src: u32,
        tag: i32,
        comm: CommId,
    ) -> Result<Status> {
        let id = self.e().irecv_internal(conv, src, tag, comm)?;
        let status = self.wait(id)?;
        match status.error {
            None => Ok(status),
            Some(e) => Err(e),
        }
    }

    /// Waits for the receive `r` ([`P2p::recv`]). The PML's blocking receive (cm) can only be
    /// finished by the MTL, so a round polls the MTL alone, and every [`FULL_ROUND_EVERY`]th
    /// round is the whole progress round (BTLs, protocol work, collectives): the shorter round
    /// notices the message sooner, and the round that finds it returns without the rest (the
    /// MTL hands that completion straight back, [`crate::mtl::Mtl::progress_waiting`]). Counted
    /// in rounds, busy or not, so that a stream of other MTL traffic cannot hold the rest of
    /// progress off.
    #[inline]
    pub fn wait_recv(&mut self, r: Posted) -> Result<Status> {
        self.wait_recv_with(r, |st| *st)
    }

    /// [`Inside::wait_recv`] handing the status to `f` where it lies; `f`'s result.
    #[inline(always)]
    pub fn wait_recv_with<R>(&mut self, r: Posted, f: impl FnOnce(&Status) -> R) -> Result<R> {
        match r {
            Posted::Req(id) => self.wait_with(id, f),
            Posted::Blocking => self.wait_blocking(f),
        }
    }

    /// Waits for the PML's blocking receive, handing its status to `f` where it lies.
    #[inline(never)]
    fn wait_blocking<R>(&mut self, f: impl FnOnce(&Status) -> R) -> Result<R> {
        let mut rounds = 0u32;
        let mut f = Some(f);
        loop {
            rounds = rounds.wrapping_add(1);
            let e = self.e();
            let n = if rounds.is_multiple_of(FULL_ROUND_EVERY) {
                let n = e.progress();
                if n > 0 {
                    if let Some(Some(r)) = e
                        .p2p
                        .recv_finished_with(Posted::Blocking, |st| f.take().map(|f| f(st)))?
                    {
                        return Ok(r);
                    }
                }
                n
            } else {
                match e.p2p.recv_round(Posted::Blocking)? {
                    RecvRound::Done => {
                        // Something moved: the next wait starts spinning afresh, not yielding.
                        e.idle = 0;
                        return match e
                            .p2p
                            .recv_finished_with(Posted::Blocking, |st| f.take().map(|f| f(st)))
                        {
                            Ok(Some(Some(r))) => Ok(r),
                            Ok(_) => Err(Error::internal("a finished receive without a status")),
                            Err(err) => Err(err),
                        };
                    }
                    RecvRound::Moved(n) => n,
                }
            };
            if n > 0 {
                e.idle = 0;
                self.share();
            } else {
                self.idle();
            }
        }
    }

    /// Waits for every request started in `scope` and frees them.
    pub fn close_scope(&mut self, scope: u32) -> Result<()> {
        self.block(|e| {
            Ok(e.p2p
                .pml
                .requests()
                .scope_pending(scope)
                .is_none()
                .then_some(()))
        })?;
        self.e().p2p.pml.requests_mut().close_scope(scope);
        Ok(())
    }

    /// Shuts down (`MPI_Finalize`): finishes outgoing protocol work, synchronises with every
    /// process so nothing is in flight, and leaves the runtime.
    pub fn finalize(&mut self) -> Result<()> {
        if self.e().p2p.finalized {
            return Err(Error::new(ErrorClass::Other, Reason::NotInitialized));
        }
        self.block(|e| Ok((!e.p2p.pml.has_pending_work()).then_some(())))?;
        crate::coll::barrier(self, CommId::WORLD)?;
        self.e().shut_down()
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
