//! The tools information interface (`MPI_T_*`): control variables, performance variables,
//! categories; no events and no event sources.
//!
//! Control variables are the run-time parameters ([`crate::params`]), one per parameter, named
//! as `stormpi-info` and `STORMPI_MCA_<name>` name them, indexed in registration order. Their
//! registry is built from the platform's sources at the first `MPI_T_init_thread` (through
//! [`Hooks::params`]), so they can be read before `MPI_Init`; once MPI is initialized, reads
//! show the engine's values. Before `MPI_Init` every variable may be written: the value is
//! given to `MPI_Init` through [`TOOL_WRITES`], the first source the platform consults (as a
//! `STORMPI_MCA_` variable would). After it, only what the engine reads at every call — the
//! collective algorithm choices, scope `MPI_T_SCOPE_ALL_EQ` — may change; everything else was
//! used to size or wire the engine (scope `MPI_T_SCOPE_READONLY`) and answers
//! `MPI_T_ERR_CVAR_SET_NEVER`.
//!
//! Performance variables read counters the engine keeps anyway (plain integers, no atomics):
//! the matching queues of a communicator, the PML's protocol counts, what went to each BTL
//! module, and how full the main pools are. All are continuous (always counting: start and
//! stop answer `MPI_T_ERR_PVAR_NO_STARTSTOP`); a counter's handle reads what happened since the
//! handle was allocated or reset, so sessions do not disturb each other.
//!
//! Categories group variables by framework: the name up to its first `_` (`btl`, `pml`,
//! `coll`...). The tools interface reports errors by return code only, never through an error
//! handler.

use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::Ordering;

use heapless::Vec;
use spin::Mutex;

use super::abi;
use super::state::{self, FINALIZED, INITIALIZED};
use super::Hooks;
use crate::api::ENGINE;
use crate::bml::MAX_BTLS;
use crate::comm::CommId;
use crate::engine::{Engine, Usage};
use crate::params::{Kind, ParamSource, Params, Source, Value};
use crate::pml::Stats;

/// Most categories.
const MAX_CATEGORIES: usize = 32;
/// Most performance-variable sessions alive at once.
const MAX_SESSIONS: usize = 16;
/// Most performance-variable handles alive at once, over every session.
const MAX_HANDLES: usize = 128;

/// The tools interface's state.
struct Tools {
    /// `MPI_T_init_thread` calls not yet matched by `MPI_T_finalize`.
    refs: u32,
    /// Each category's name (a framework), in order of first appearance.
    categories: Vec<&'static str, MAX_CATEGORIES>,
    sessions: [Slot; MAX_SESSIONS],
    handles: [PvarHandle; MAX_HANDLES],
}

/// A session slot: its generation (odd while alive) makes stale handles detectable.
#[derive(Clone, Copy)]
struct Slot {
    gen: u16,
}

impl Slot {
    const fn live(self) -> bool {
        self.gen & 1 == 1
    }
}

/// A performance-variable handle.
#[derive(Clone, Copy)]
struct PvarHandle {
    slot: Slot,
    session: u16,
    pvar: u16,
    comm: Option<CommId>,
    count: u8,
    /// Counter values at allocation or the latest reset (counters read the difference).
    base: [u64; MAX_BTLS],
}

const FREE_HANDLE: PvarHandle = PvarHandle {
    slot: Slot { gen: 0 },
    session: 0,
    pvar: 0,
    comm: None,
    count: 0,
    base: [0; MAX_BTLS],
};

static TOOLS: Mutex<Tools> = Mutex::new(Tools {
    refs: 0,
    categories: Vec::new(),
    sessions: [Slot { gen: 0 }; MAX_SESSIONS],
    handles: [FREE_HANDLE; MAX_HANDLES],
});

/// The parameter registry, built at the first `MPI_T_init_thread` and kept (indices stay valid
/// for the life of the process). Its own lock: [`TOOL_WRITES`] reads it while the platform
/// builds a registry.
static REGISTRY: Mutex<Option<Params>> = Mutex::new(None);

/// The values tools wrote through `MPI_T_cvar_write` before `MPI_Init`, as a parameter source
/// for the platform to put first: `MPI_Init` then takes them.
pub static TOOL_WRITES: ToolWrites = ToolWrites;

/// See [`TOOL_WRITES`].
pub struct ToolWrites;

impl ParamSource for ToolWrites {
    fn source(&self) -> Source {
        Source::Api
    }

    fn lookup(&self, name: &str, out: &mut [u8]) -> Option<usize> {
        let reg = REGISTRY.lock();
        let e = reg
            .as_ref()?
            .entry(name)
            .filter(|e| e.source == Source::Api)?;
        let mut text: heapless::String<{ crate::params::MAX_STR }> = heapless::String::new();
        match &e.value {
            Value::Int(v) => core::fmt::write(&mut text, format_args!("{v}")).ok()?,
            Value::Bool(v) => text.push_str(if *v { "1" } else { "0" }).ok()?,
            Value::Str(s) => text.push_str(s).ok()?,
        }
        let n = text.len().min(out.len());
        out[..n].copy_from_slice(&text.as_bytes()[..n]);
        Some(n)
    }
}

/// The framework a variable belongs to: its name up to the first `_`.
fn framework(name: &str) -> &str {
    name.split('_').next().unwrap_or(name)
}

/// The body of `MPI_T_init_thread`, bound to the platform by [`crate::bind_platform!`].
///
/// # Safety
/// `provided` is NULL or points to an `int`.
pub unsafe fn init_thread(hooks: &'static Hooks, required: c_int, provided: *mut c_int) -> c_int {
    if REGISTRY.lock().is_none() {
        // Built without the lock held: the platform's sources include TOOL_WRITES, which takes it.
        let Ok(params) = (hooks.params)() else {
            return abi::MPI_T_ERR_CANNOT_INIT;
        };
        let mut reg = REGISTRY.lock();
        if reg.is_none() {
            let mut t = TOOLS.lock();
            let names = params
                .iter()
                .map(|e| e.def.name)
                .chain(PVARS.iter().map(|p| p.name));
            for n in names {
                let f = framework(n);
                if !t.categories.iter().any(|c| framework(c) == f) && t.categories.push(n).is_err()
                {
                    return abi::MPI_T_ERR_CANNOT_INIT;
                }
            }
            *reg = Some(params);
        }
    }
    TOOLS.lock().refs += 1;
    if !provided.is_null() {
        // SAFETY: checked non-null; MPI requires it to point to an int.
        unsafe { *provided = required.clamp(abi::MPI_THREAD_SINGLE, abi::MPI_THREAD_MULTIPLE) };
    }
    abi::MPI_SUCCESS
}

/// `MPI_T_ERR_NOT_INITIALIZED` unless the tools interface is initialized.
fn check_init() -> Result<(), c_int> {
    if TOOLS.lock().refs == 0 {
        return Err(abi::MPI_T_ERR_NOT_INITIALIZED);
    }
    Ok(())
}

fn code(r: Result<(), c_int>) -> c_int {
    r.err().unwrap_or(abi::MPI_SUCCESS)
}

/// Writes `v` through `p` if it is not NULL.
///
/// # Safety
/// `p` is NULL or valid for a write of `T`.
unsafe fn put<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: the caller's contract.
        unsafe { p.write(v) };
    }
}

/// Writes `text` as the tools interface returns strings: with `out` NULL or `*len` 0 only the
/// length the string needs (with its NUL) goes to `*len`; else at most `*len - 1` bytes and a
/// NUL, and `*len` becomes what was written, NUL included.
///
/// # Safety
/// `len` is NULL or points to an `int`; `out` is NULL or holds `*len` bytes.
unsafe fn put_str(text: &str, out: *mut c_char, len: *mut c_int) {
    if len.is_null() {
        return;
    }
    // SAFETY: checked non-null; the caller's contract.
    let cap = unsafe { *len };
    if out.is_null() || cap <= 0 {
        // SAFETY: as above.
        unsafe { *len = text.len() as c_int + 1 };
        return;
    }
    let n = text.len().min(cap as usize - 1);
    // SAFETY: `out` holds `cap` bytes and `n < cap` leaves room for the NUL.
    unsafe {
        core::ptr::copy_nonoverlapping(text.as_ptr(), out.cast::<u8>(), n);
        *out.add(n) = 0;
        *len = n as c_int + 1;
    }
}

/// Reads a C string argument.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn c_str<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    unsafe { core::ffi::CStr::from_ptr(p) }.to_str().ok()
}

/// Runs `f` on the registry (the tools interface must be initialized).
fn with_registry<T>(f: impl FnOnce(&Params) -> Result<T, c_int>) -> Result<T, c_int> {
    check_init()?;
    match REGISTRY.lock().as_ref() {
        Some(p) => f(p),
        None => Err(abi::MPI_T_ERR_NOT_INITIALIZED),
    }
}

/// Whether MPI was initialized (finalized or not): values then come from the engine.
fn mpi_started() -> bool {
    INITIALIZED.load(Ordering::Acquire)
}

// ---------------------------------------------------------------------------------------------
// Control variables

/// What a control variable holds, as C sees it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CvarType {
    /// An `int` (integers that fit, booleans as 0/1).
    Int,
    /// An `MPI_Count` (integers that do not fit an `int`).
    Count,
    /// An `int` naming one of an enumeration's items: `enum_index` into `coll::ALGORITHMS`.
    Enum(usize),
    /// A string of at most `MAX_STR` bytes and its NUL.
    Str,
}

fn cvar_type(def: &crate::params::ParamDef) -> CvarType {
    if let Some(i) = crate::coll::ALGORITHMS
        .iter()
        .position(|(d, _)| d.name == def.name)
    {
        return CvarType::Enum(i);
    }
    match def.kind {
        Kind::Int { min, max } if min >= c_int::MIN as i64 && max <= c_int::MAX as i64 => {
            CvarType::Int
        }
        Kind::Int { .. } => CvarType::Count,
        Kind::Bool => CvarType::Int,
        Kind::Str => CvarType::Str,
    }
}

impl CvarType {
    fn datatype(self) -> abi::MPI_Datatype {
        match self {
            CvarType::Int | CvarType::Enum(_) => abi::MPI_INT,
            CvarType::Count => abi::MPI_COUNT,
            CvarType::Str => abi::MPI_CHAR,
        }
    }

    fn count(self) -> c_int {
        match self {
            CvarType::Str => crate::params::MAX_STR as c_int + 1,
            _ => 1,
        }
    }
}

/// The `MPI_T_enum` of enumeration `i` (a small non-null token, not an address).
fn enum_handle(i: usize) -> abi::MPI_T_enum {
    (i + 1) as abi::MPI_T_enum
}

fn enum_index(h: abi::MPI_T_enum) -> Option<usize> {
    (h as usize)
        .checked_sub(1)
        .filter(|&i| i < crate::coll::ALGORITHMS.len())
}

/// The `MPI_T_cvar_handle` of control variable `i` (a token: a handle holds nothing else, as
/// every control variable is bound to no object).
fn cvar_handle(i: usize) -> abi::MPI_T_cvar_handle {
    (i + 1) as abi::MPI_T_cvar_handle
}

/// The control variable a handle names, with its name.
fn cvar_of(h: abi::MPI_T_cvar_handle) -> Result<(&'static crate::params::ParamDef, usize), c_int> {
    with_registry(|p| {
        let i = (h as usize)
            .checked_sub(1)
            .ok_or(abi::MPI_T_ERR_INVALID_HANDLE)?;
        p.iter()
            .nth(i)
            .map(|e| (e.def, i))
            .ok_or(abi::MPI_T_ERR_INVALID_HANDLE)
    })
}

/// The current value of parameter `name`: the engine's once MPI is initialized, else the
/// registry's.
fn current_value(name: &str) -> Result<Value, c_int> {
    if mpi_started() {
        if let Some(mut cx) = ENGINE.enter() {
            if let Some(e) = cx.e().params().entry(name) {
                return Ok(e.value.clone());
            }
        }
    }
    with_registry(|p| {
        p.entry(name)
            .map(|e| e.value.clone())
            .ok_or(abi::MPI_T_ERR_INVALID_HANDLE)
    })
}

super::mpi! {
    fn MPI_T_finalize / PMPI_T_finalize() {
        let mut t = TOOLS.lock();
        if t.refs == 0 {
            return abi::MPI_T_ERR_NOT_INITIALIZED;
        }
        t.refs -= 1;
        abi::MPI_SUCCESS
    }

    fn MPI_T_cvar_get_num / PMPI_T_cvar_get_num(num_cvar: *mut c_int) {
        code(with_registry(|p| {
            // SAFETY: MPI requires `num_cvar` to point to an int.
            unsafe { put(num_cvar, p.iter().count() as c_int) };
            Ok(())
        }))
    }

    fn MPI_T_cvar_get_info / PMPI_T_cvar_get_info(
        cvar_index: c_int,
        name: *mut c_char,
        name_len: *mut c_int,
        verbosity: *mut c_int,
        datatype: *mut abi::MPI_Datatype,
        enumtype: *mut abi::MPI_T_enum,
        desc: *mut c_char,
        desc_len: *mut c_int,
        bind: *mut c_int,
        scope: *mut c_int
    ) {
        code(with_registry(|p| {
            let def = usize::try_from(cvar_index)
                .ok()
                .and_then(|i| p.iter().nth(i))
                .ok_or(abi::MPI_T_ERR_INVALID_INDEX)?
                .def;
            let ty = cvar_type(def);
            let verb = if def.name.contains('_') {
                abi::MPI_T_VERBOSITY_TUNER_BASIC
            } else {
                // The component selections (`btl`, `pml`): what users set first.
                abi::MPI_T_VERBOSITY_USER_BASIC
            };
            let sc = if Engine::param_settable(def.name) {
                abi::MPI_T_SCOPE_ALL_EQ
            } else {
                abi::MPI_T_SCOPE_READONLY
            };
            let en = match ty {
                CvarType::Enum(i) => enum_handle(i),
                _ => abi::MPI_T_ENUM_NULL,
            };
            // SAFETY: MPI requires each non-NULL pointer to hold its value (strings: `*len`
            // bytes).
            unsafe {
                put_str(def.name, name, name_len);
                put(verbosity, verb);
                put(datatype, ty.datatype());
                put(enumtype, en);
                put_str(def.description, desc, desc_len);
                put(bind, abi::MPI_T_BIND_NO_OBJECT);
                put(scope, sc);
            }
            Ok(())
        }))
    }

    fn MPI_T_cvar_get_index / PMPI_T_cvar_get_index(name: *const c_char, cvar_index: *mut c_int) {
        code(with_registry(|p| {
            // SAFETY: MPI requires `name` to be a C string.
            let n = unsafe { c_str(name) }.ok_or(abi::MPI_T_ERR_INVALID_NAME)?;
            let i = p.iter().position(|e| e.def.name == n).ok_or(abi::MPI_T_ERR_INVALID_NAME)?;
            // SAFETY: MPI requires `cvar_index` to point to an int.
            unsafe { put(cvar_index, i as c_int) };
            Ok(())
        }))
    }

    fn MPI_T_cvar_handle_alloc / PMPI_T_cvar_handle_alloc(
        cvar_index: c_int,
        obj_handle: *mut c_void,
        handle: *mut abi::MPI_T_cvar_handle,
        count: *mut c_int
    ) {
        let _ = obj_handle; // every control variable is bound to no object
        code(with_registry(|p| {
            let i = usize::try_from(cvar_index)
                .ok()
                .filter(|&i| i < p.iter().count())
                .ok_or(abi::MPI_T_ERR_INVALID_INDEX)?;
            let def = p.iter().nth(i).ok_or(abi::MPI_T_ERR_INVALID_INDEX)?.def;
            // SAFETY: MPI requires `handle` and `count` to point to their types.
            unsafe {
                put(handle, cvar_handle(i));
                put(count, cvar_type(def).count());
            }
            Ok(())
        }))
    }

    fn MPI_T_cvar_handle_free / PMPI_T_cvar_handle_free(handle: *mut abi::MPI_T_cvar_handle) {
        if let Err(c) = check_init() {
            return c;
        }
        if handle.is_null() {
            return abi::MPI_T_ERR_INVALID_HANDLE;
        }
        // SAFETY: checked non-null; MPI requires it to point to a handle.
        let h = unsafe { *handle };
        if let Err(c) = cvar_of(h) {
            return c;
        }
        // SAFETY: as above.
        unsafe { *handle = abi::MPI_T_CVAR_HANDLE_NULL };
        abi::MPI_SUCCESS
    }

    fn MPI_T_cvar_read / PMPI_T_cvar_read(handle: abi::MPI_T_cvar_handle, buf: *mut c_void) {
        code((|| {
            let (def, _) = cvar_of(handle)?;
            if buf.is_null() {
                return Err(abi::MPI_T_ERR_INVALID);
            }
            let value = current_value(def.name)?;
            // SAFETY: MPI requires `buf` to hold `count` elements of the variable's datatype.
            unsafe {
                match (cvar_type(def), &value) {
                    (CvarType::Int, Value::Int(v)) => buf.cast::<c_int>().write(*v as c_int),
                    (CvarType::Int, Value::Bool(v)) => buf.cast::<c_int>().write(*v as c_int),
                    (CvarType::Count, Value::Int(v)) => buf.cast::<i64>().write(*v),
                    (CvarType::Enum(i), Value::Str(s)) => {
                        let n = crate::coll::choice(s, crate::coll::ALGORITHMS[i].1).unwrap_or(0);
                        buf.cast::<c_int>().write(n as c_int)
                    }
                    (CvarType::Str, Value::Str(s)) => {
                        core::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), s.len());
                        buf.cast::<u8>().add(s.len()).write(0);
                    }
                    _ => return Err(abi::MPI_T_ERR_INVALID),
                }
            }
            Ok(())
        })())
    }

    fn MPI_T_cvar_write / PMPI_T_cvar_write(handle: abi::MPI_T_cvar_handle, buf: *const c_void) {
        code((|| {
            let (def, _) = cvar_of(handle)?;
            if buf.is_null() {
                return Err(abi::MPI_T_ERR_INVALID);
            }
            let mut text: heapless::String<{ crate::params::MAX_STR }> = heapless::String::new();
            // SAFETY: MPI requires `buf` to hold `count` elements of the variable's datatype.
            unsafe {
                match cvar_type(def) {
                    CvarType::Int => {
                        let v = buf.cast::<c_int>().read();
                        core::fmt::write(&mut text, format_args!("{v}"))
                            .map_err(|_| abi::MPI_T_ERR_INVALID)?;
                    }
                    CvarType::Count => {
                        let v = buf.cast::<i64>().read();
                        core::fmt::write(&mut text, format_args!("{v}"))
                            .map_err(|_| abi::MPI_T_ERR_INVALID)?;
                    }
                    CvarType::Enum(i) => {
                        let names = crate::coll::ALGORITHMS[i].1;
                        let v = buf.cast::<c_int>().read();
                        let name = match usize::try_from(v) {
                            Ok(0) => "auto",
                            Ok(k) if k <= names.len() => names[k - 1],
                            _ => return Err(abi::MPI_T_ERR_INVALID),
                        };
                        text.push_str(name).map_err(|_| abi::MPI_T_ERR_INVALID)?;
                    }
                    CvarType::Str => {
                        let s = c_str(buf.cast::<c_char>()).ok_or(abi::MPI_T_ERR_INVALID)?;
                        text.push_str(s).map_err(|_| abi::MPI_T_ERR_INVALID)?;
                    }
                }
            }
            if FINALIZED.load(Ordering::Acquire) {
                return Err(abi::MPI_T_ERR_CVAR_SET_NEVER);
            }
            if mpi_started() {
                if !Engine::param_settable(def.name) {
                    // Used to size or wire the engine at MPI_Init: fixed from then on.
                    return Err(abi::MPI_T_ERR_CVAR_SET_NEVER);
                }
                let mut cx = ENGINE.enter().ok_or(abi::MPI_T_ERR_CVAR_SET_NOT_NOW)?;
                if !state::active() {
                    return Err(abi::MPI_T_ERR_CVAR_SET_NEVER);
                }
                return cx.e().set_param(def.name, &text).map_err(|_| abi::MPI_T_ERR_INVALID);
            }
            let mut reg = REGISTRY.lock();
            let p = reg.as_mut().ok_or(abi::MPI_T_ERR_NOT_INITIALIZED)?;
            p.set(def.name, &text).map_err(|_| abi::MPI_T_ERR_INVALID)
        })())
    }

    fn MPI_T_enum_get_info / PMPI_T_enum_get_info(
        enumtype: abi::MPI_T_enum,
        num: *mut c_int,
        name: *mut c_char,
        name_len: *mut c_int
    ) {
        code((|| {
            check_init()?;
            let i = enum_index(enumtype).ok_or(abi::MPI_T_ERR_INVALID_HANDLE)?;
            let (def, names) = crate::coll::ALGORITHMS[i];
            // SAFETY: MPI requires the non-NULL pointers to hold their values.
            unsafe {
                put(num, names.len() as c_int + 1);
                put_str(def.name, name, name_len);
            }
            Ok(())
        })())
    }

    fn MPI_T_enum_get_item / PMPI_T_enum_get_item(
        enumtype: abi::MPI_T_enum,
        indx: c_int,
        value: *mut c_int,
        name: *mut c_char,
        name_len: *mut c_int
    ) {
        code((|| {
            check_init()?;
            let i = enum_index(enumtype).ok_or(abi::MPI_T_ERR_INVALID_HANDLE)?;
            let names = crate::coll::ALGORITHMS[i].1;
            let item = match usize::try_from(indx) {
                Ok(0) => "auto",
                Ok(k) if k <= names.len() => names[k - 1],
                _ => return Err(abi::MPI_T_ERR_INVALID_ITEM),
            };
            // SAFETY: MPI requires the non-NULL pointers to hold their values.
            unsafe {
                put(value, indx);
                put_str(item, name, name_len);
            }
            Ok(())
        })())
    }
}

// ---------------------------------------------------------------------------------------------
// Performance variables

/// Where a performance variable's value comes from.
#[derive(Clone, Copy)]
enum Reading {
    /// A communicator's posted receives.
    Posted,
    /// A communicator's unexpected messages.
    Unexpected,
    /// The most unexpected messages a communicator held at once.
    UnexpectedHigh,
    /// A PML counter.
    Stat(fn(&Stats) -> u64),
    /// Fragments handed to each BTL module.
    BtlFrags,
    /// Bytes handed to each BTL module.
    BtlBytes,
    /// A pool's (in use, held, most) triple, and which of the three.
    Pool(fn(&Usage) -> (u32, u32, u32), u8),
}

/// A performance variable.
struct Pvar {
    name: &'static str,
    desc: &'static str,
    class: c_int,
    reading: Reading,
}

impl Pvar {
    fn bind(&self) -> c_int {
        match self.reading {
            Reading::Posted | Reading::Unexpected | Reading::UnexpectedHigh => {
                abi::MPI_T_BIND_MPI_COMM
            }
            _ => abi::MPI_T_BIND_NO_OBJECT,
        }
    }

    /// Counters may be reset and written (per handle); levels, sizes and marks may not.
    fn readonly(&self) -> bool {
        self.class != abi::MPI_T_PVAR_CLASS_COUNTER
    }

    fn per_btl(&self) -> bool {
        matches!(self.reading, Reading::BtlFrags | Reading::BtlBytes)
    }
}

macro_rules! stat {
    ($name:literal, $field:ident, $desc:literal) => {
        Pvar {
            name: $name,
            desc: $desc,
            class: abi::MPI_T_PVAR_CLASS_COUNTER,
            reading: Reading::Stat(|s| s.$field),
        }
    };
}

macro_rules! pool {
    ($name:literal, $class:ident, $field:ident, $which:literal, $desc:literal) => {
        Pvar {
            name: $name,
            desc: $desc,
            class: abi::$class,
            reading: Reading::Pool(|u| u.$field, $which),
        }
    };
}

/// Every performance variable, in index order.
static PVARS: &[Pvar] = &[
    Pvar {
        name: "pml_ob1_posted_queue_length",
        desc: "Receives posted on the communicator and not matched yet",
        class: abi::MPI_T_PVAR_CLASS_LEVEL,
        reading: Reading::Posted,
    },
    Pvar {
        name: "pml_ob1_unexpected_queue_length",
        desc: "Messages that arrived on the communicator before their receive, not received yet",
        class: abi::MPI_T_PVAR_CLASS_LEVEL,
        reading: Reading::Unexpected,
    },
    Pvar {
        name: "pml_ob1_unexpected_queue_high_water",
        desc: "Most unexpected messages the communicator held at once since it was made",
        class: abi::MPI_T_PVAR_CLASS_HIGHWATERMARK,
        reading: Reading::UnexpectedHigh,
    },
    stat!(
        "pml_eager_sent",
        eager_sent,
        "Messages sent eagerly (in one fragment)"
    ),
    stat!(
        "pml_rndv_sent",
        rndv_sent,
        "Rendezvous sends started (data follows the receiver's ACK)"
    ),
    stat!(
        "pml_rget_sent",
        rget_sent,
        "Rendezvous sends offering the message for reading (RGET)"
    ),
    stat!(
        "pml_reads",
        reads,
        "Messages this process read from their senders (RGET gets)"
    ),
    stat!(
        "pml_frags_sent",
        frags_sent,
        "Rendezvous data fragments sent"
    ),
    stat!(
        "pml_unexpected",
        unexpected,
        "Messages that arrived before their receive was posted"
    ),
    stat!(
        "pml_out_of_order",
        out_of_order,
        "Messages that arrived ahead of an earlier one"
    ),
    stat!(
        "pml_send_stalls",
        send_stalls,
        "Times a send waited for room in a BTL"
    ),
    Pvar {
        name: "btl_fragments_sent",
        desc: "Fragments handed to each BTL module (one element per module, in the engine's \
               order: self first)",
        class: abi::MPI_T_PVAR_CLASS_COUNTER,
        reading: Reading::BtlFrags,
    },
    Pvar {
        name: "btl_bytes_sent",
        desc: "Bytes (headers included) handed to each BTL module (one element per module, in \
               the engine's order: self first)",
        class: abi::MPI_T_PVAR_CLASS_COUNTER,
        reading: Reading::BtlBytes,
    },
    pool!(
        "mpi_requests_in_use",
        MPI_T_PVAR_CLASS_LEVEL,
        requests,
        0,
        "Requests alive"
    ),
    pool!(
        "mpi_requests_capacity",
        MPI_T_PVAR_CLASS_SIZE,
        requests,
        1,
        "Request slots held now (the pool grows up to mpi_requests_max)"
    ),
    pool!(
        "mpi_requests_max",
        MPI_T_PVAR_CLASS_SIZE,
        requests,
        2,
        "Most request slots the pool may grow to"
    ),
    pool!(
        "mpi_datatypes_in_use",
        MPI_T_PVAR_CLASS_LEVEL,
        types,
        0,
        "Datatypes alive, predefined ones included"
    ),
    pool!(
        "mpi_datatypes_capacity",
        MPI_T_PVAR_CLASS_SIZE,
        types,
        1,
        "Datatype slots held now"
    ),
    pool!(
        "mpi_datatypes_max",
        MPI_T_PVAR_CLASS_SIZE,
        types,
        2,
        "Most datatype slots the table may grow to"
    ),
    pool!(
        "mpi_communicators_in_use",
        MPI_T_PVAR_CLASS_LEVEL,
        comms,
        0,
        "Communicators alive (with those being made)"
    ),
    pool!(
        "mpi_communicators_capacity",
        MPI_T_PVAR_CLASS_SIZE,
        comms,
        1,
        "Communicator slots held now"
    ),
    pool!(
        "mpi_communicators_max",
        MPI_T_PVAR_CLASS_SIZE,
        comms,
        2,
        "Most communicator slots the table may grow to"
    ),
];

/// Reads pvar `p` (bound to `comm` where it applies) into `out`: its `count` elements, from
/// `e` (`None` before `MPI_Init`: nothing has happened yet).
fn sample(p: &Pvar, e: Option<&Engine>, comm: Option<CommId>, out: &mut [u64; MAX_BTLS]) {
    *out = [0; MAX_BTLS];
    let Some(e) = e else { return };
    match p.reading {
        Reading::Posted | Reading::Unexpected | Reading::UnexpectedHigh => {
            let q = comm
                .and_then(|c| e.p2p.pml.queue_lengths(c))
                .unwrap_or((0, 0, 0));
            out[0] = u64::from(match p.reading {
                Reading::Posted => q.0,
                Reading::Unexpected => q.1,
                _ => q.2,
            });
        }
        Reading::Stat(f) => out[0] = f(&e.stats()),
        Reading::BtlFrags => *out = e.stats().btl_frags,
        Reading::BtlBytes => *out = e.stats().btl_bytes,
        Reading::Pool(f, which) => {
            let (a, b, c) = f(&e.usage());
            out[0] = u64::from([a, b, c][which as usize]);
        }
    }
}

/// Samples pvar `p` from the engine, if there is one.
fn sample_now(p: &Pvar, comm: Option<CommId>, out: &mut [u64; MAX_BTLS]) {
    match ENGINE.enter() {
        Some(mut cx) if mpi_started() => sample(p, Some(cx.e()), comm, out),
        _ => sample(p, None, comm, out),
    }
}

/// Session handle tokens: generation in the upper bits, slot + 1 in the low 16.
fn token(slot: usize, gen: u16) -> usize {
    (usize::from(gen) << 16) | (slot + 1)
}

fn untoken(t: usize) -> Option<(usize, u16)> {
    let slot = (t & 0xffff).checked_sub(1)?;
    Some((slot, (t >> 16) as u16))
}

impl Tools {
    fn session(&self, h: abi::MPI_T_pvar_session) -> Result<usize, c_int> {
        let (i, gen) = untoken(h as usize).ok_or(abi::MPI_T_ERR_INVALID_SESSION)?;
        match self.sessions.get(i) {
            Some(s) if s.live() && s.gen == gen => Ok(i),
            _ => Err(abi::MPI_T_ERR_INVALID_SESSION),
        }
    }

    fn handle(&self, session: usize, h: abi::MPI_T_pvar_handle) -> Result<usize, c_int> {
        let (i, gen) = untoken(h as usize).ok_or(abi::MPI_T_ERR_INVALID_HANDLE)?;
        match self.handles.get(i) {
            Some(x) if x.slot.live() && x.slot.gen == gen && x.session as usize == session => Ok(i),
            _ => Err(abi::MPI_T_ERR_INVALID_HANDLE),
        }
    }
}

fn all_handles() -> abi::MPI_T_pvar_handle {
    super::env::MPI_T_PVAR_ALL_HANDLES.0 as abi::MPI_T_pvar_handle
}

/// Runs `f` on the tools state with the session and handle named (the handle may be
/// `MPI_T_PVAR_ALL_HANDLES` when `all` is given: `f` then runs for each of the session's).
fn on_handles(
    session: abi::MPI_T_pvar_session,
    handle: abi::MPI_T_pvar_handle,
    all: bool,
    mut f: impl FnMut(&mut PvarHandle) -> Result<(), c_int>,
) -> c_int {
    let mut t = TOOLS.lock();
    if t.refs == 0 {
        return abi::MPI_T_ERR_NOT_INITIALIZED;
    }
    let s = match t.session(session) {
        Ok(s) => s,
        Err(c) => return c,
    };
    if handle == all_handles() {
        if !all {
            return abi::MPI_T_ERR_INVALID_HANDLE;
        }
        for h in t.handles.iter_mut() {
            if h.slot.live() && h.session as usize == s {
                if let Err(c) = f(h) {
                    return c;
                }
            }
        }
        return abi::MPI_SUCCESS;
    }
    match t.handle(s, handle) {
        Ok(i) => code(f(&mut t.handles[i])),
        Err(c) => c,
    }
}

/// Resets a counter handle: it reads 0 from now.
fn reset(h: &mut PvarHandle) {
    let p = &PVARS[h.pvar as usize];
    sample_now(p, h.comm, &mut h.base);
}

super::mpi! {
    fn MPI_T_pvar_get_num / PMPI_T_pvar_get_num(num_pvar: *mut c_int) {
        code(check_init().map(|_| {
            // SAFETY: MPI requires `num_pvar` to point to an int.
            unsafe { put(num_pvar, PVARS.len() as c_int) }
        }))
    }

    fn MPI_T_pvar_get_info / PMPI_T_pvar_get_info(
        pvar_index: c_int,
        name: *mut c_char,
        name_len: *mut c_int,
        verbosity: *mut c_int,
        var_class: *mut c_int,
        datatype: *mut abi::MPI_Datatype,
        enumtype: *mut abi::MPI_T_enum,
        desc: *mut c_char,
        desc_len: *mut c_int,
        bind: *mut c_int,
        readonly: *mut c_int,
        continuous: *mut c_int,
        atomic: *mut c_int
    ) {
        code((|| {
            check_init()?;
            let p = usize::try_from(pvar_index)
                .ok()
                .and_then(|i| PVARS.get(i))
                .ok_or(abi::MPI_T_ERR_INVALID_INDEX)?;
            // SAFETY: MPI requires each non-NULL pointer to hold its value.
            unsafe {
                put_str(p.name, name, name_len);
                put(verbosity, abi::MPI_T_VERBOSITY_TUNER_BASIC);
                put(var_class, p.class);
                put(datatype, abi::MPI_UNSIGNED_LONG_LONG);
                put(enumtype, abi::MPI_T_ENUM_NULL);
                put_str(p.desc, desc, desc_len);
                put(bind, p.bind());
                put(readonly, p.readonly() as c_int);
                put(continuous, 1);
                // A read and reset happen under the engine's lock: nothing counts in between.
                put(atomic, (!p.readonly()) as c_int);
            }
            Ok(())
        })())
    }

    fn MPI_T_pvar_get_index / PMPI_T_pvar_get_index(
        name: *const c_char,
        var_class: c_int,
        pvar_index: *mut c_int
    ) {
        code((|| {
            check_init()?;
            // SAFETY: MPI requires `name` to be a C string.
            let n = unsafe { c_str(name) }.ok_or(abi::MPI_T_ERR_INVALID_NAME)?;
            let i = PVARS
                .iter()
                .position(|p| p.name == n && p.class == var_class)
                .ok_or(abi::MPI_T_ERR_INVALID_NAME)?;
            // SAFETY: MPI requires `pvar_index` to point to an int.
            unsafe { put(pvar_index, i as c_int) };
            Ok(())
        })())
    }

    fn MPI_T_pvar_session_create / PMPI_T_pvar_session_create(session: *mut abi::MPI_T_pvar_session) {
        let mut t = TOOLS.lock();
        if t.refs == 0 {
            return abi::MPI_T_ERR_NOT_INITIALIZED;
        }
        if session.is_null() {
            return abi::MPI_T_ERR_INVALID;
        }
        let Some(i) = t.sessions.iter().position(|s| !s.live()) else {
            return abi::MPI_T_ERR_OUT_OF_SESSIONS;
        };
        let gen = t.sessions[i].gen.wrapping_add(1);
        t.sessions[i].gen = gen;
        // SAFETY: checked non-null; MPI requires it to point to a session handle.
        unsafe { *session = token(i, gen) as abi::MPI_T_pvar_session };
        abi::MPI_SUCCESS
    }

    fn MPI_T_pvar_session_free / PMPI_T_pvar_session_free(session: *mut abi::MPI_T_pvar_session) {
        let mut t = TOOLS.lock();
        if t.refs == 0 {
            return abi::MPI_T_ERR_NOT_INITIALIZED;
        }
        if session.is_null() {
            return abi::MPI_T_ERR_INVALID_SESSION;
        }
        // SAFETY: checked non-null; MPI requires it to point to a session handle.
        let s = match t.session(unsafe { *session }) {
            Ok(s) => s,
            Err(c) => return c,
        };
        for h in t.handles.iter_mut() {
            if h.slot.live() && h.session as usize == s {
                h.slot.gen = h.slot.gen.wrapping_add(1);
            }
        }
        t.sessions[s].gen = t.sessions[s].gen.wrapping_add(1);
        // SAFETY: as above.
        unsafe { *session = abi::MPI_T_PVAR_SESSION_NULL };
        abi::MPI_SUCCESS
    }

    fn MPI_T_pvar_handle_alloc / PMPI_T_pvar_handle_alloc(
        session: abi::MPI_T_pvar_session,
        pvar_index: c_int,
        obj_handle: *mut c_void,
        handle: *mut abi::MPI_T_pvar_handle,
        count: *mut c_int
    ) {
        let Some(p) = usize::try_from(pvar_index).ok().and_then(|i| PVARS.get(i)) else {
            return if TOOLS.lock().refs == 0 {
                abi::MPI_T_ERR_NOT_INITIALIZED
            } else {
                abi::MPI_T_ERR_INVALID_INDEX
            };
        };
        if handle.is_null() {
            return abi::MPI_T_ERR_INVALID;
        }
        // The object and the number of elements need the engine: look before taking the lock.
        let mut comm = None;
        let mut n = 1u8;
        if p.bind() == abi::MPI_T_BIND_MPI_COMM || p.per_btl() {
            let Some(mut cx) = ENGINE.enter().filter(|_| state::active()) else {
                // No communicator or BTL module exists outside MPI_Init..MPI_Finalize.
                return abi::MPI_T_ERR_INVALID;
            };
            let e = cx.e();
            if p.per_btl() {
                n = e.btls().count() as u8;
            } else {
                if obj_handle.is_null() {
                    return abi::MPI_T_ERR_INVALID_HANDLE;
                }
                // SAFETY: checked non-null; MPI requires it to point to an MPI_Comm.
                let h = unsafe { *obj_handle.cast::<abi::MPI_Comm>() };
                match super::handles::comm(h) {
                    Ok(c) if e.comm(c).is_ok() => comm = Some(c),
                    _ => return abi::MPI_T_ERR_INVALID_HANDLE,
                }
            }
        }
        let mut base = [0; MAX_BTLS];
        if !p.readonly() {
            sample_now(p, comm, &mut base);
        }
        let mut t = TOOLS.lock();
        if t.refs == 0 {
            return abi::MPI_T_ERR_NOT_INITIALIZED;
        }
        let s = match t.session(session) {
            Ok(s) => s,
            Err(c) => return c,
        };
        let Some(i) = t.handles.iter().position(|h| !h.slot.live()) else {
            return abi::MPI_T_ERR_OUT_OF_HANDLES;
        };
        let gen = t.handles[i].slot.gen.wrapping_add(1);
        t.handles[i] = PvarHandle {
            slot: Slot { gen },
            session: s as u16,
            pvar: pvar_index as u16,
            comm,
            count: n,
            base,
        };
        // SAFETY: `handle` checked non-null; MPI requires `count` to point to an int.
        unsafe {
            *handle = token(i, gen) as abi::MPI_T_pvar_handle;
            put(count, c_int::from(n));
        }
        abi::MPI_SUCCESS
    }

    fn MPI_T_pvar_handle_free / PMPI_T_pvar_handle_free(
        session: abi::MPI_T_pvar_session,
        handle: *mut abi::MPI_T_pvar_handle
    ) {
        if handle.is_null() {
            return abi::MPI_T_ERR_INVALID_HANDLE;
        }
        // SAFETY: checked non-null; MPI requires it to point to a handle.
        let h = unsafe { *handle };
        let rc = on_handles(session, h, false, |x| {
            x.slot.gen = x.slot.gen.wrapping_add(1);
            Ok(())
        });
        if rc == abi::MPI_SUCCESS {
            // SAFETY: as above.
            unsafe { *handle = abi::MPI_T_PVAR_HANDLE_NULL };
        }
        rc
    }

    fn MPI_T_pvar_start / PMPI_T_pvar_start(
        session: abi::MPI_T_pvar_session,
        handle: abi::MPI_T_pvar_handle
    ) {
        // Every variable is continuous: all of a session's handles are "started" already.
        let all = handle == all_handles();
        on_handles(session, handle, true, |_| {
            if all { Ok(()) } else { Err(abi::MPI_T_ERR_PVAR_NO_STARTSTOP) }
        })
    }

    fn MPI_T_pvar_stop / PMPI_T_pvar_stop(
        session: abi::MPI_T_pvar_session,
        handle: abi::MPI_T_pvar_handle
    ) {
        let all = handle == all_handles();
        on_handles(session, handle, true, |_| {
            if all { Ok(()) } else { Err(abi::MPI_T_ERR_PVAR_NO_STARTSTOP) }
        })
    }

    fn MPI_T_pvar_read / PMPI_T_pvar_read(
        session: abi::MPI_T_pvar_session,
        handle: abi::MPI_T_pvar_handle,
        buf: *mut c_void
    ) {
        on_handles(session, handle, false, |h| {
            // SAFETY: MPI requires `buf` to hold the handle's count of unsigned long longs.
            unsafe { read_into(h, buf, false) }
        })
    }

    fn MPI_T_pvar_readreset / PMPI_T_pvar_readreset(
        session: abi::MPI_T_pvar_session,
        handle: abi::MPI_T_pvar_handle,
        buf: *mut c_void
    ) {
        on_handles(session, handle, false, |h| {
            if PVARS[h.pvar as usize].readonly() {
                return Err(abi::MPI_T_ERR_PVAR_NO_WRITE);
            }
            // SAFETY: MPI requires `buf` to hold the handle's count of unsigned long longs.
            unsafe { read_into(h, buf, true) }
        })
    }

    fn MPI_T_pvar_reset / PMPI_T_pvar_reset(
        session: abi::MPI_T_pvar_session,
        handle: abi::MPI_T_pvar_handle
    ) {
        let all = handle == all_handles();
        on_handles(session, handle, true, |h| {
            if PVARS[h.pvar as usize].readonly() {
                // MPI_T_PVAR_ALL_HANDLES resets those that can be.
                return if all { Ok(()) } else { Err(abi::MPI_T_ERR_PVAR_NO_WRITE) };
            }
            reset(h);
            Ok(())
        })
    }

    fn MPI_T_pvar_write / PMPI_T_pvar_write(
        session: abi::MPI_T_pvar_session,
        handle: abi::MPI_T_pvar_handle,
        buf: *const c_void
    ) {
        on_handles(session, handle, false, |h| {
            let p = &PVARS[h.pvar as usize];
            if p.readonly() {
                return Err(abi::MPI_T_ERR_PVAR_NO_WRITE);
            }
            if buf.is_null() {
                return Err(abi::MPI_T_ERR_INVALID);
            }
            let mut now = [0; MAX_BTLS];
            sample_now(p, h.comm, &mut now);
            for (k, b) in h.base.iter_mut().enumerate().take(h.count as usize) {
                // SAFETY: MPI requires `buf` to hold the handle's count of unsigned long longs.
                let v = unsafe { buf.cast::<u64>().add(k).read() };
                // The handle reads `v` now and counts on from it.
                *b = now[k].wrapping_sub(v);
            }
            Ok(())
        })
    }
}

/// Writes handle `h`'s value into `buf`, then resets it if `then_reset`.
///
/// # Safety
/// `buf` is NULL or holds `h.count` `u64`s.
unsafe fn read_into(h: &mut PvarHandle, buf: *mut c_void, then_reset: bool) -> Result<(), c_int> {
    if buf.is_null() {
        return Err(abi::MPI_T_ERR_INVALID);
    }
    let p = &PVARS[h.pvar as usize];
    let mut now = [0; MAX_BTLS];
    sample_now(p, h.comm, &mut now);
    for (k, v) in now.iter().enumerate().take(h.count as usize) {
        let x = if p.readonly() {
            *v
        } else {
            v.wrapping_sub(h.base[k])
        };
        // SAFETY: the caller's contract.
        unsafe { buf.cast::<u64>().add(k).write(x) };
    }
    if then_reset {
        h.base = now;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Categories, event sources and events

/// Category `i`'s framework, if there is such a category.
fn category(i: c_int) -> Result<&'static str, c_int> {
    let t = TOOLS.lock();
    if t.refs == 0 {
        return Err(abi::MPI_T_ERR_NOT_INITIALIZED);
    }
    usize::try_from(i)
        .ok()
        .and_then(|i| t.categories.get(i))
        .map(|n| framework(n))
        .ok_or(abi::MPI_T_ERR_INVALID_INDEX)
}

/// The control variables of framework `f`, by index.
fn cvars_of<'a>(p: &'a Params, f: &'a str) -> impl Iterator<Item = usize> + 'a {
    p.iter()
        .enumerate()
        .filter(move |(_, e)| framework(e.def.name) == f)
        .map(|(i, _)| i)
}

/// The performance variables of framework `f`, by index.
fn pvars_of(f: &str) -> impl Iterator<Item = usize> + '_ {
    PVARS
        .iter()
        .enumerate()
        .filter(move |(_, p)| framework(p.name) == f)
        .map(|(i, _)| i)
}

/// Writes up to `len` of `items` into `out`.
///
/// # Safety
/// `out` is NULL or holds `len` ints.
unsafe fn put_indices(items: impl Iterator<Item = usize>, len: c_int, out: *mut c_int) {
    if out.is_null() {
        return;
    }
    for (k, i) in items.take(len.max(0) as usize).enumerate() {
        // SAFETY: the caller's contract; `k < len`.
        unsafe { out.add(k).write(i as c_int) };
    }
}

super::mpi! {
    fn MPI_T_category_get_num / PMPI_T_category_get_num(num_cat: *mut c_int) {
        let t = TOOLS.lock();
        if t.refs == 0 {
            return abi::MPI_T_ERR_NOT_INITIALIZED;
        }
        // SAFETY: MPI requires `num_cat` to point to an int.
        unsafe { put(num_cat, t.categories.len() as c_int) };
        abi::MPI_SUCCESS
    }

    fn MPI_T_category_get_info / PMPI_T_category_get_info(
        cat_index: c_int,
        name: *mut c_char,
        name_len: *mut c_int,
        desc: *mut c_char,
        desc_len: *mut c_int,
        num_cvars: *mut c_int,
        num_pvars: *mut c_int,
        num_categories: *mut c_int
    ) {
        code((|| {
            let f = category(cat_index)?;
            let nc = with_registry(|p| Ok(cvars_of(p, f).count()))?;
            let mut text: heapless::String<96> = heapless::String::new();
            let _ = core::fmt::write(
                &mut text,
                format_args!("Control and performance variables of the {f} framework"),
            );
            // SAFETY: MPI requires each non-NULL pointer to hold its value.
            unsafe {
                put_str(f, name, name_len);
                put_str(&text, desc, desc_len);
                put(num_cvars, nc as c_int);
                put(num_pvars, pvars_of(f).count() as c_int);
                put(num_categories, 0);
            }
            Ok(())
        })())
    }

    fn MPI_T_category_get_index / PMPI_T_category_get_index(name: *const c_char, cat_index: *mut c_int) {
        let t = TOOLS.lock();
        if t.refs == 0 {
            return abi::MPI_T_ERR_NOT_INITIALIZED;
        }
        // SAFETY: MPI requires `name` to be a C string.
        let Some(n) = (unsafe { c_str(name) }) else {
            return abi::MPI_T_ERR_INVALID_NAME;
        };
        match t.categories.iter().position(|c| framework(c) == n) {
            Some(i) => {
                // SAFETY: MPI requires `cat_index` to point to an int.
                unsafe { put(cat_index, i as c_int) };
                abi::MPI_SUCCESS
            }
            None => abi::MPI_T_ERR_INVALID_NAME,
        }
    }

    fn MPI_T_category_get_cvars / PMPI_T_category_get_cvars(cat_index: c_int, len: c_int, indices: *mut c_int) {
        code((|| {
            let f = category(cat_index)?;
            with_registry(|p| {
                // SAFETY: MPI requires `indices` to hold `len` ints.
                unsafe { put_indices(cvars_of(p, f), len, indices) };
                Ok(())
            })
        })())
    }

    fn MPI_T_category_get_pvars / PMPI_T_category_get_pvars(cat_index: c_int, len: c_int, indices: *mut c_int) {
        code(category(cat_index).map(|f| {
            // SAFETY: MPI requires `indices` to hold `len` ints.
            unsafe { put_indices(pvars_of(f), len, indices) }
        }))
    }

    fn MPI_T_category_get_categories / PMPI_T_category_get_categories(cat_index: c_int, len: c_int, indices: *mut c_int) {
        // Categories are flat: none holds another.
        let _ = (len, indices);
        code(category(cat_index).map(|_| ()))
    }

    fn MPI_T_category_get_num_events / PMPI_T_category_get_num_events(cat_index: c_int, num_events: *mut c_int) {
        code(category(cat_index).map(|_| {
            // SAFETY: MPI requires `num_events` to point to an int.
            unsafe { put(num_events, 0) }
        }))
    }

    fn MPI_T_category_get_events / PMPI_T_category_get_events(cat_index: c_int, len: c_int, indices: *mut c_int) {
        let _ = (len, indices);
        code(category(cat_index).map(|_| ()))
    }

    fn MPI_T_category_changed / PMPI_T_category_changed(update_number: *mut c_int) {
        // The categories are fixed at the first MPI_T_init_thread: the number never changes.
        code(check_init().map(|_| {
            // SAFETY: MPI requires `update_number` to point to an int.
            unsafe { put(update_number, 0) }
        }))
    }

    fn MPI_T_source_get_num / PMPI_T_source_get_num(num_sources: *mut c_int) {
        code(check_init().map(|_| {
            // SAFETY: MPI requires `num_sources` to point to an int.
            unsafe { put(num_sources, 0) }
        }))
    }

    fn MPI_T_source_get_info / PMPI_T_source_get_info(
        source_index: c_int,
        name: *mut c_char,
        name_len: *mut c_int,
        desc: *mut c_char,
        desc_len: *mut c_int,
        ordering: *mut abi::MPI_T_source_order,
        ticks_per_second: *mut abi::MPI_Count,
        max_ticks: *mut abi::MPI_Count,
        info: *mut abi::MPI_Info
    ) {
        let _ = (source_index, name, name_len, desc, desc_len, ordering, ticks_per_second, max_ticks, info);
        code(check_init().and(Err(abi::MPI_T_ERR_INVALID_INDEX)))
    }

    fn MPI_T_source_get_timestamp / PMPI_T_source_get_timestamp(source_index: c_int, timestamp: *mut abi::MPI_Count) {
        let _ = (source_index, timestamp);
        code(check_init().and(Err(abi::MPI_T_ERR_INVALID_INDEX)))
    }

    fn MPI_T_event_get_num / PMPI_T_event_get_num(num_events: *mut c_int) {
        code(check_init().map(|_| {
            // SAFETY: MPI requires `num_events` to point to an int.
            unsafe { put(num_events, 0) }
        }))
    }

    fn MPI_T_event_get_info / PMPI_T_event_get_info(
        event_index: c_int,
        name: *mut c_char,
        name_len: *mut c_int,
        verbosity: *mut c_int,
        array_of_datatypes: *mut abi::MPI_Datatype,
        array_of_displacements: *mut abi::MPI_Aint,
        num_elements: *mut c_int,
        enumtype: *mut abi::MPI_T_enum,
        info: *mut abi::MPI_Info,
        desc: *mut c_char,
        desc_len: *mut c_int,
        bind: *mut c_int
    ) {
        let _ = (event_index, name, name_len, verbosity, array_of_datatypes, array_of_displacements,
                 num_elements, enumtype, info, desc, desc_len, bind);
        code(check_init().and(Err(abi::MPI_T_ERR_INVALID_INDEX)))
    }

    fn MPI_T_event_get_index / PMPI_T_event_get_index(name: *const c_char, event_index: *mut c_int) {
        let _ = (name, event_index);
        code(check_init().and(Err(abi::MPI_T_ERR_INVALID_NAME)))
    }

    fn MPI_T_event_handle_alloc / PMPI_T_event_handle_alloc(
        event_index: c_int,
        obj_handle: *mut c_void,
        info: abi::MPI_Info,
        event_registration: *mut abi::MPI_T_event_registration
    ) {
        let _ = (event_index, obj_handle, info, event_registration);
        code(check_init().and(Err(abi::MPI_T_ERR_INVALID_INDEX)))
    }
}

/// Event functions on registrations and instances: none can exist, so every handle is invalid.
macro_rules! no_event_handles {
    ($($name:ident / $pname:ident ( $($arg:ident : $ty:ty),* )),* $(,)?) => {
        super::mpi! {$(
            fn $name / $pname($($arg: $ty),*) {
                let _ = ($($arg),*);
                code(check_init().and(Err(abi::MPI_T_ERR_INVALID_HANDLE)))
            }
        )*}
    };
}

no_event_handles!(
    MPI_T_event_handle_free / PMPI_T_event_handle_free(
        event_registration: abi::MPI_T_event_registration,
        user_data: *mut c_void,
        free_cb_function: *const c_void
    ),
    MPI_T_event_handle_get_info / PMPI_T_event_handle_get_info(
        event_registration: abi::MPI_T_event_registration,
        info_used: *mut abi::MPI_Info
    ),
    MPI_T_event_handle_set_info / PMPI_T_event_handle_set_info(
        event_registration: abi::MPI_T_event_registration,
        info: abi::MPI_Info
    ),
    MPI_T_event_register_callback / PMPI_T_event_register_callback(
        event_registration: abi::MPI_T_event_registration,
        cb_safety: abi::MPI_T_cb_safety,
        info: abi::MPI_Info,
        user_data: *mut c_void,
        event_cb_function: *const c_void
    ),
    MPI_T_event_callback_get_info / PMPI_T_event_callback_get_info(
        event_registration: abi::MPI_T_event_registration,
        cb_safety: abi::MPI_T_cb_safety,
        info_used: *mut abi::MPI_Info
    ),
    MPI_T_event_callback_set_info / PMPI_T_event_callback_set_info(
        event_registration: abi::MPI_T_event_registration,
        cb_safety: abi::MPI_T_cb_safety,
        info: abi::MPI_Info
    ),
    MPI_T_event_set_dropped_handler / PMPI_T_event_set_dropped_handler(
        event_registration: abi::MPI_T_event_registration,
        dropped_cb_function: *const c_void
    ),
    MPI_T_event_read / PMPI_T_event_read(
        event_instance: abi::MPI_T_event_instance,
        element_index: c_int,
        buffer: *mut c_void
    ),
    MPI_T_event_copy / PMPI_T_event_copy(
        event_instance: abi::MPI_T_event_instance,
        buffer: *mut c_void
    ),
    MPI_T_event_get_timestamp / PMPI_T_event_get_timestamp(
        event_instance: abi::MPI_T_event_instance,
        event_timestamp: *mut abi::MPI_Count
    ),
    MPI_T_event_get_source / PMPI_T_event_get_source(
        event_instance: abi::MPI_T_event_instance,
        source_index: *mut c_int
    ),
);

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::params::{Default, ParamDef};

    #[test]
    fn categories_are_frameworks() {
        assert_eq!(framework("btl_sm_eager_limit"), "btl");
        assert_eq!(framework("btl"), "btl");
        assert_eq!(framework("pml_ob1_posted_queue_length"), "pml");
    }

    #[test]
    fn strings_report_their_length_with_the_nul() {
        let mut buf = [0x55 as c_char; 8];
        let mut len: c_int = 0;
        // SAFETY: `len` is an int; no buffer is given.
        unsafe { put_str("abcdef", core::ptr::null_mut(), &mut len) };
        assert_eq!(len, 7);
        len = 4;
        // SAFETY: `buf` holds 8 bytes, `len` says 4.
        unsafe { put_str("abcdef", buf.as_mut_ptr(), &mut len) };
        assert_eq!(len, 4);
        assert_eq!(
            buf[..4]
                .iter()
                .map(|&c| c as u8)
                .collect::<std::vec::Vec<_>>(),
            b"abc\0"
        );
        assert_eq!(buf[4], 0x55);
    }

    #[test]
    fn tokens_round_trip_and_zero_is_no_token() {
        assert_eq!(untoken(token(5, 3)), Some((5, 3)));
        assert_eq!(untoken(token(0, 0xffff)), Some((0, 0xffff)));
        assert_eq!(untoken(0), None);
        assert_eq!(enum_index(abi::MPI_T_ENUM_NULL), None);
        assert_eq!(enum_index(enum_handle(2)), Some(2));
        assert_eq!(enum_index(enum_handle(crate::coll::ALGORITHMS.len())), None);
    }

    static SMALL: ParamDef = ParamDef {
        name: "test_small",
        kind: Kind::Int { min: 0, max: 100 },
        default: Default::Int(1),
        description: "",
    };
    static BIG: ParamDef = ParamDef {
        name: "test_big",
        kind: Kind::Int {
            min: 0,
            max: 1 << 40,
        },
        default: Default::Int(1),
        description: "",
    };

    #[test]
    fn cvar_types_follow_the_parameter_kinds() {
        assert!(cvar_type(&SMALL) == CvarType::Int);
        assert!(cvar_type(&BIG) == CvarType::Count);
        assert_eq!(cvar_type(&BIG).datatype(), abi::MPI_COUNT);
        assert!(cvar_type(&crate::coll::BARRIER_ALG) == CvarType::Enum(0));
        assert!(cvar_type(&crate::engine::BTL_SELECT) == CvarType::Str);
        assert_eq!(cvar_type(&crate::engine::BTL_SELECT).count(), 129);
    }

    #[test]
    fn only_values_written_through_the_tools_reach_init() {
        let mut p = Params::new(&[]);
        p.register_all(&[&SMALL, &BIG]).unwrap();
        p.set("test_small", "42").unwrap();
        *REGISTRY.lock() = Some(p);
        let mut out = [0u8; 16];
        let n = TOOL_WRITES.lookup("test_small", &mut out).unwrap();
        assert_eq!(&out[..n], b"42");
        assert_eq!(TOOL_WRITES.lookup("test_big", &mut out), None);
        assert_eq!(TOOL_WRITES.lookup("nope", &mut out), None);
        *REGISTRY.lock() = None;
    }

    #[test]
    fn every_pvar_name_is_unique_and_in_a_category_of_its_own_framework() {
        for (i, p) in PVARS.iter().enumerate() {
            assert!(PVARS[..i].iter().all(|q| q.name != p.name), "{}", p.name);
            assert!(
                ["pml", "btl", "mpi"].contains(&framework(p.name)),
                "{}",
                p.name
            );
        }
    }
}
