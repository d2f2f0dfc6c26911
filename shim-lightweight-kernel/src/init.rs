//! Bringing up the engine on a node, and the platform hooks of the C API.
//!
//! The job comes from the environment ([`crate::env`]), the network from Portals
//! ([`crate::ptl`]); the parameter `pml` chooses the transport: `cm` (the default here) puts the
//! Portals MTL under the engine, `ob1` the Portals BTL under the ordinary PML. Nothing here opens
//! a socket or starts a process.

use std::mem::MaybeUninit;

use stormpi_core::btl::Btl;
use stormpi_core::capi::Hooks;
use stormpi_core::engine::{btl_selected, Engine, Init, BTL_SELECT};
use stormpi_core::error::{Error, ErrorClass, Reason, Result};
use stormpi_core::memory::Memory;
use stormpi_core::mtl::Mtl;
use stormpi_core::params::{ParamSource, Params, Source};
use stormpi_core::platform::Platform;
use stormpi_core::pml::PML_SELECT;
use stormpi_core::rte::Rte;

use crate::btl::{self, PortalsBtl};
use crate::env::JobEnv;
use crate::mtl::{self, PortalsMtl};
use crate::platform::{self, LwkPlatform};
use crate::ptl::Portals;
use crate::rte::LwkRte;

static PLATFORM: LwkPlatform = LwkPlatform::new();

fn leak<T>(v: T) -> &'static mut T {
    Box::leak(Box::new(v))
}

/// Parameters from `STORMPI_MCA_<name>` environment variables (what a launcher can pass).
pub struct EnvSource;

impl ParamSource for EnvSource {
    fn source(&self) -> Source {
        Source::Environment
    }

    fn lookup(&self, name: &str, out: &mut [u8]) -> Option<usize> {
        let v = std::env::var(format!("STORMPI_MCA_{name}"))
            .or_else(|_| std::env::var(format!("STORMPI_MCA_{}", name.to_ascii_uppercase())))
            .ok()?;
        let n = v.len().min(out.len());
        out[..n].copy_from_slice(&v.as_bytes()[..n]);
        Some(n)
    }
}

/// Registers every parameter of the node build in `params`.
pub fn register_params(params: &mut Params) -> Result<()> {
    Engine::register_params(params)?;
    params.register_all(&btl::PARAMS)?;
    params.register_all(&mtl::PARAMS)?;
    params.register_all(&crate::osc::PARAMS)?;
    params.register_all(&platform::PARAMS)
}

/// The parameter registry with the node's source.
pub fn params() -> Result<Params> {
    let env: &'static dyn ParamSource = leak(EnvSource);
    // What a tool wrote through MPI_T before MPI_Init comes first: it was set last.
    let tools: &'static dyn ParamSource = &stormpi_core::capi::TOOL_WRITES;
    let mut params = Params::new(&[tools, env]);
    register_params(&mut params)?;
    Ok(params)
}

fn runtime(what: &'static str, detail: &str) -> Error {
    platform::eprint_line(&format!("stormpi: {what}: {detail}"));
    Error::new(ErrorClass::Intern, Reason::Runtime { what })
}

/// Which transport the parameters choose: true for the MTL (`cm`).
pub fn use_mtl(params: &Params) -> bool {
    params.str(&PML_SELECT).trim() != "ob1"
}

/// Brings up this process's engine.
pub fn engine() -> Result<Engine> {
    let job = JobEnv::from_env().map_err(|e| runtime("the launcher's environment", &e))?;
    // The software Portals interface finds its job in the same variables; an ALPS start names
    // them otherwise, so say them the way it reads them.
    if std::env::var_os("STORMPI_RANK").is_none() {
        std::env::set_var("STORMPI_RANK", job.rank.to_string());
        std::env::set_var("STORMPI_SIZE", job.size.to_string());
        if std::env::var_os("STORMPI_JOBID").is_none() {
            std::env::set_var("STORMPI_JOBID", &job.job_id);
        }
    }
    let params = params()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let local = job.local_size();
    let yield_when_idle = match params.int(&platform::YIELD_WHEN_IDLE) {
        0 => false,
        1 => true,
        _ => job.local_size() > cores,
    };
    PLATFORM.configure(
        job.rank,
        job.nodes[job.rank as usize],
        yield_when_idle,
        params.u32(&platform::LOG_LEVEL),
        params.u32(&platform::SPIN_ROUNDS),
    );
    crate::log::open_output(job.rank);
    crate::node_log!(
        Info,
        "node start: rank {=u32} of {=u32} ({=str}), job {=str}, pml {=str}",
        job.rank,
        job.size,
        job.source,
        job.job_id.as_str(),
        if use_mtl(&params) { "cm" } else { "ob1" }
    );
    let portals = Portals::open(job.rank, job.size).map_err(|e| runtime("Portals", &e))?;
    let ni = portals.ni;
    crate::osc::open(&params, ni, portals.max_atomic)?;
    let (rank, size) = (job.rank, job.size);
    let rte: &'static mut dyn Rte = leak(LwkRte::new(job, portals));
    PLATFORM.set_memory_default(platform::memory_default(local));
    let memory = pool_memory(&params, Engine::memory_needed(&params, size));
    let mut btls = heapless::Vec::new();
    let mut mtl_module: Option<&'static mut dyn Mtl> = None;
    if use_mtl(&params) {
        mtl_module = Some(leak(PortalsMtl::new(&params, ni, rank, size)?));
    } else if btl_selected(params.str(&BTL_SELECT), "portals") {
        let module: &'static mut dyn Btl = leak(PortalsBtl::new(&params, ni, rank)?);
        let _ = btls.push(module);
    }
    Engine::with_mtl(
        Init {
            memory,
            params,
            platform: &PLATFORM,
            rte,
            btls,
        },
        mtl_module,
    )
}

/// The engine's init region: the start of the region reserved for all its memory (the bound,
/// `mpi_memory_max`), so every later grant comes from there too. Without a reservation (the
/// address space refused it) the init region comes from the heap and the pools keep their
/// initial sizes.
fn pool_memory(params: &Params, bytes: usize) -> &'static mut [MaybeUninit<u8>] {
    let bound = Memory::bound(params, &PLATFORM);
    if PLATFORM.reserve(bound) {
        if let Some(region) = PLATFORM.grant(bytes) {
            return region;
        }
    } else {
        stormpi_core::log!(
            &PLATFORM,
            stormpi_core::platform::Level::Warn,
            "cannot reserve {} bytes of address space for the engine (mpi_memory_max): its pools \
             will not grow",
            bound
        );
    }
    Box::leak(vec![MaybeUninit::<u8>::uninit(); bytes.max(1)].into_boxed_slice())
}

fn exit(code: i32) -> ! {
    std::process::exit(code)
}

fn temp_alloc(n: usize) -> Option<*mut u8> {
    let mut v = Vec::<u8>::new();
    v.try_reserve_exact(n).ok()?;
    let mut v = std::mem::ManuallyDrop::new(v);
    Some(v.as_mut_ptr())
}

fn temp_free(p: *mut u8, n: usize) {
    // SAFETY: `p` came from `temp_alloc(n)`: a Vec<u8> with capacity `n` and length 0.
    drop(unsafe { Vec::from_raw_parts(p, 0, n) });
}

/// The platform hooks of the C API.
pub static HOOKS: Hooks = Hooks {
    init: engine,
    params,
    now_ns: platform::now_ns,
    tick_ns: platform::tick_ns,
    thread_id: platform::thread_id,
    eprint: platform::eprint_line,
    exit,
    temp_alloc,
    temp_free,
};

stormpi_core::bind_platform!(HOOKS);

// The Fortran binding (mpif.h, the mpi module): its procedures and common blocks are part of the
// library, over the C functions above.
use stormpi_fortran as _;
