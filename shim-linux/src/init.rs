//! Bringing up the engine on Linux, and the platform hooks of the C API.

use std::mem::MaybeUninit;

use stormpi_bootstrap::pmi::{PmiClient, PmiError};
use stormpi_core::capi::Hooks;
use stormpi_core::engine::{btl_selected, Engine, Init, BTL_SELECT};
use stormpi_core::error::{Error, ErrorClass, Reason, Result};
use stormpi_core::params::{ParamSource, Params};
use stormpi_core::rte::Rte;

use crate::params::{CmdlineSource, EnvSource, FileSource};
use crate::platform::{self, LinuxPlatform};
use crate::rte::{self, PmiRte};
use crate::sm::{self, Sm};
use crate::tcp;

static PLATFORM: LinuxPlatform = LinuxPlatform::new();

fn leak<T>(v: T) -> &'static mut T {
    Box::leak(Box::new(v))
}

/// Memory for the engine's pools: an anonymous private mapping, never returned (the engine
/// lives until the process ends).
fn pool_memory(bytes: usize) -> Result<&'static mut [MaybeUninit<u8>]> {
    // SAFETY: an anonymous private mapping has no preconditions; the result is checked.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes.max(1),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(Error::new(
            ErrorClass::NoMem,
            Reason::MemoryTooSmall {
                needed: bytes,
                given: 0,
            },
        ));
    }
    // SAFETY: the mapping is `bytes` long, readable and writable, and owned by nobody else; it
    // is never unmapped, so `'static` holds.
    Ok(unsafe { std::slice::from_raw_parts_mut(p.cast::<MaybeUninit<u8>>(), bytes) })
}

/// The job's id for file names, the same at every rank of the job: `STORMPI_JOBID` under
/// stormrun, else the PMI key-value space name (Hydra), else Slurm's job and step, else the
/// process id (a singleton, which shares nothing).
fn job_id(kvsname: Option<&str>) -> String {
    let raw = std::env::var("STORMPI_JOBID")
        .ok()
        .or_else(|| kvsname.map(str::to_string))
        .or_else(|| {
            let job = std::env::var("SLURM_JOB_ID").ok()?;
            Some(format!(
                "slurm{job}.{}",
                std::env::var("SLURM_STEP_ID").unwrap_or_default()
            ))
        })
        .unwrap_or_else(|| format!("single{}", std::process::id()));
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect()
}

/// Makes the C library flush standard output at every newline when it is not a terminal.
///
/// Under a launcher a rank's stdout is a pipe, which the C library buffers in blocks: what a rank
/// printed but had not flushed is lost when the job ends because another rank failed (the launcher
/// ends this one). Line by line, as on a terminal, every printed line reaches the launcher.
fn line_buffer_stdout() {
    extern "C" {
        /// The C library's standard output stream.
        static mut stdout: *mut libc::FILE;
    }
    // SAFETY: `stdout` is the C library's stream for descriptor 1, valid for the process's life
    // and read here by value; setvbuf without a buffer only changes when the stream flushes, and
    // keeps whatever is buffered already.
    unsafe {
        if libc::isatty(1) == 0 && !stdout.is_null() {
            libc::setvbuf(stdout, core::ptr::null_mut(), libc::_IOLBF, 0);
        }
    }
}

/// Ranks on this node, as the launcher says (for deciding whether to yield the core).
fn local_ranks() -> Option<usize> {
    [
        "STORMPI_LOCAL_SIZE",
        "MPI_LOCALNRANKS",
        "SLURM_NTASKS_PER_NODE",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.parse().ok())
}

/// Cores of this node the job's ranks share: the launcher's count (taken
/// before it bound the rank to some of them), else the cores this process may
/// use.
fn cores() -> usize {
    std::env::var("STORMPI_NUM_CORES")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The verbs BTL, if libibverbs and a device with an active port are there. Without them the
/// component steps aside quietly (a note at `mpi_log_level` 2), unless the `btl` list names it:
/// then the job cannot run as asked and init fails with the cause.
fn verbs_module(params: &Params, me: u32, n: u32) -> Result<Option<stormpi_verbs::VerbsBtl>> {
    let list = params.str(&BTL_SELECT).trim();
    let named = !list.starts_with('^') && list.split(',').any(|c| c.trim() == "verbs");
    let (why, fatal) = match stormpi_verbs::VerbsBtl::new(params, me, n, &PLATFORM) {
        Ok(m) => return Ok(Some(m)),
        Err(stormpi_verbs::Unavailable::Absent(why)) => (why, named),
        Err(stormpi_verbs::Unavailable::Failed(why)) => (why, true),
    };
    if !fatal {
        use stormpi_core::platform::{Level, Platform};
        if PLATFORM.log_enabled(Level::Info) {
            PLATFORM.log(Level::Info, format_args!("verbs BTL not used: {why}"));
        }
        return Ok(None);
    }
    eprintln!("stormpi: rank {me}: the verbs BTL cannot start: {why}");
    Err(Error::new(
        ErrorClass::Other,
        Reason::Transport {
            btl: "verbs",
            what: "the verbs BTL cannot start (see the message above)",
        },
    ))
}

/// Registers every parameter of this build in `params`.
pub fn register_params(params: &mut Params) -> Result<()> {
    Engine::register_params(params)?;
    params.register_all(&sm::PARAMS)?;
    params.register_all(&tcp::PARAMS)?;
    params.register_all(&stormpi_verbs::PARAMS)?;
    params.register(&crate::progress::OSC_PROGRESS_THREAD)?;
    params.register_all(&platform::PARAMS)
}

/// The parameter registry with the Linux sources.
pub fn params() -> Result<Params> {
    let cmdline: &'static dyn ParamSource = leak(CmdlineSource::from_env());
    let env: &'static dyn ParamSource = leak(EnvSource);
    let file: &'static dyn ParamSource = leak(FileSource::load());
    // What a tool wrote through MPI_T before MPI_Init comes first: it was set last.
    let tools: &'static dyn ParamSource = &stormpi_core::capi::TOOL_WRITES;
    let mut params = Params::new(&[tools, cmdline, env, file]);
    register_params(&mut params)?;
    Ok(params)
}

/// Brings up this process's engine.
pub fn engine() -> Result<Engine> {
    stormpi_core::op::set_long_double(stormpi_long_double_op);
    let params = params()?;
    let mut kvsname = None;
    let rte: &'static mut dyn Rte = match PmiClient::from_env() {
        None => leak(rte::singleton()),
        Some(Ok(client)) => {
            line_buffer_stdout();
            let pmi = PmiRte::new(client)?;
            kvsname = pmi.kvsname().map(str::to_string);
            leak(pmi)
        }
        Some(Err(e)) => {
            match e {
                // The environment is wrong: say so, without blaming a server.
                PmiError::Env { .. } | PmiError::Unsupported(_) => eprintln!("stormpi: {e}"),
                _ => eprintln!("stormpi: cannot reach the launcher's PMI server: {e}"),
            }
            return Err(Error::new(
                ErrorClass::Intern,
                Reason::Runtime {
                    what: "PMI connection failed",
                },
            ));
        }
    };
    let me = rte.rank();
    let n = rte.size();
    let oversubscribed = local_ranks().unwrap_or(n as usize) > cores();
    let (yield_when_idle, spin_rounds) = match params.int(&platform::YIELD_WHEN_IDLE) {
        0 => (false, params.u32(&platform::SPIN_ROUNDS)),
        1 => (true, 0),
        _ if oversubscribed => (false, params.u32(&platform::OVERSUBSCRIBED_SPIN_ROUNDS)),
        _ => (false, params.u32(&platform::SPIN_ROUNDS)),
    };
    let idle = platform::idle_mode(
        params.int(&platform::IDLE_SLEEP),
        oversubscribed,
        platform::session_leader(),
        params.u32(&platform::IDLE_SLEEP_NS),
    );
    PLATFORM.configure(
        me.0,
        yield_when_idle,
        params.u32(&platform::LOG_LEVEL),
        spin_rounds,
        idle,
    );
    PLATFORM.passive.set_mode(crate::progress::mode_of(
        params.str(&crate::progress::OSC_PROGRESS_THREAD),
    )?);
    PLATFORM.set_memory_default(platform::memory_default(
        local_ranks().unwrap_or(n as usize),
    ));

    let mut btls = heapless::Vec::new();
    if n > 1 && btl_selected(params.str(&BTL_SELECT), "sm") {
        let module: &'static mut dyn stormpi_core::btl::Btl = leak({
            let mut sm = Sm::new(&params, &job_id(kvsname.as_deref()), me)?;
            sm.enable_osc(&params, &PLATFORM)?;
            sm
        });
        let _ = btls.push(module);
    }
    if n > 1 && btl_selected(params.str(&BTL_SELECT), "verbs") {
        if let Some(module) = verbs_module(&params, me.0, n)? {
            let module: &'static mut dyn stormpi_core::btl::Btl = leak(module);
            let _ = btls.push(module);
        }
    }
    // A job of one has tcp too when processes of other jobs may join it (connect/accept, join):
    // one interface, enough for them and within a singleton's small modex.
    let joinable = params.u32(&stormpi_core::engine::DPM_MAX_PROCS) > 0;
    if (n > 1 || joinable) && btl_selected(params.str(&BTL_SELECT), "tcp") {
        // One module per interface, within what the engine takes (it adds `self` itself).
        let room = match n {
            1 => 1,
            _ => stormpi_core::bml::MAX_BTLS.saturating_sub(1 + btls.len()),
        };
        for m in tcp::modules(&params, me, room)? {
            PLATFORM.passive.add_source(m.event_fd());
            let module: &'static mut dyn stormpi_core::btl::Btl = leak(m);
            let _ = btls.push(module);
        }
    }
    let memory = pool_memory(Engine::memory_needed(&params, n))?;
    Engine::new(Init {
        memory,
        params,
        platform: &PLATFORM,
        rte,
        btls,
    })
}

fn eprint(line: &str) {
    eprintln!("{line}");
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

extern "C" {
    /// `long double` arithmetic for reductions (`src/long_double.c`, built by build.rs).
    fn stormpi_long_double_op(
        op: std::ffi::c_int,
        kind: std::ffi::c_int,
        inout: *mut u8,
        input: *const u8,
        n: usize,
        elem: usize,
        stride: usize,
        index_at: usize,
    ) -> std::ffi::c_int;
}

/// The platform hooks of the C API.
pub static HOOKS: Hooks = Hooks {
    init: engine,
    params,
    now_ns: platform::now_ns,
    tick_ns: platform::tick_ns,
    thread_id: platform::thread_id,
    eprint,
    exit,
    temp_alloc,
    temp_free,
};

stormpi_core::bind_platform!(HOOKS);

// The Fortran binding (mpif.h, the mpi module): its procedures and common blocks are part of the
// library, over the C functions above.
use stormpi_fortran as _;
