//! A PMIx client (Slurm's `--mpi=pmix`, Open MPI's `mpirun`, PRRTE): the system's `libpmix`,
//! loaded at run time.
//!
//! PMIx has no wire protocol of its own to speak: its client library is the interface. Loading
//! it with `dlopen` when a PMIx launcher started us keeps the library free of a build-time C
//! dependency (the static `libmpi.a` links nothing of PMIx, and a system without it still runs
//! every other launcher). `STORMPI_PMIX_LIB` names the library to load, else `libpmix.so.2` (the
//! soname of PMIx 3 to 5).
//!
//! Only the stable core of the PMIx 3+ ABI is used: `PMIx_Init`, `Put`, `Commit`, `Fence` with
//! data collection, `Get`, `Abort`, `Finalize`, `Error_string`, with `pmix_proc_t`,
//! `pmix_value_t` and `pmix_info_t` laid out as the standard fixes them (checked against the
//! system's `pmix.h` by a test where it is installed).

use std::ffi::{c_char, c_int, c_void, CStr, CString};

use super::error::PmiError;

/// `PMIX_MAX_NSLEN` + 1.
const NSPACE_LEN: usize = 256;
/// `PMIX_MAX_KEYLEN` + 1.
const KEY_LEN: usize = 512;
/// The longest key.
pub const KEYLEN_MAX: usize = KEY_LEN - 1;
/// `PMIX_RANK_WILDCARD`: the job as a whole.
const RANK_WILDCARD: u32 = u32::MAX - 1;

/// `pmix_data_type_t` values.
const PMIX_BOOL: u16 = 1;
const PMIX_STRING: u16 = 3;
const PMIX_UINT16: u16 = 13;
const PMIX_UINT32: u16 = 14;
const PMIX_BYTE_OBJECT: u16 = 27;
const PMIX_PROC_RANK: u16 = 40;
/// `PMIX_GLOBAL`: a put visible to every process of the job.
const SCOPE_GLOBAL: u8 = 3;
/// `PMIX_ERR_NOT_FOUND`.
const ERR_NOT_FOUND: c_int = -46;

/// `pmix_proc_t`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Proc {
    nspace: [c_char; NSPACE_LEN],
    rank: u32,
}

/// `pmix_byte_object_t`.
#[repr(C)]
#[derive(Clone, Copy)]
struct ByteObject {
    bytes: *mut c_char,
    size: usize,
}

/// The union of `pmix_value_t`, as far as this client reads or writes it; 24 bytes as in
/// the C header (its largest member is three words).
#[repr(C)]
#[derive(Clone, Copy)]
union Data {
    flag: bool,
    uint16: u16,
    uint32: u32,
    string: *mut c_char,
    bo: ByteObject,
    words: [u64; 3],
}

/// `pmix_value_t`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Value {
    kind: u16,
    data: Data,
}

/// `pmix_info_t`.
#[repr(C)]
struct Info {
    key: [c_char; KEY_LEN],
    flags: u32,
    value: Value,
}

type InitFn = unsafe extern "C" fn(*mut Proc, *mut Info, usize) -> c_int;
type FinalizeFn = unsafe extern "C" fn(*const Info, usize) -> c_int;
type AbortFn = unsafe extern "C" fn(c_int, *const c_char, *mut Proc, usize) -> c_int;
type PutFn = unsafe extern "C" fn(u8, *const c_char, *mut Value) -> c_int;
type CommitFn = unsafe extern "C" fn() -> c_int;
type FenceFn = unsafe extern "C" fn(*const Proc, usize, *const Info, usize) -> c_int;
type GetFn =
    unsafe extern "C" fn(*const Proc, *const c_char, *const Info, usize, *mut *mut Value) -> c_int;
type ErrorStringFn = unsafe extern "C" fn(c_int) -> *const c_char;

/// The entry points of the loaded library.
struct Lib {
    init: InitFn,
    finalize: FinalizeFn,
    abort: AbortFn,
    put: PutFn,
    commit: CommitFn,
    fence: FenceFn,
    get: GetFn,
    error_string: ErrorStringFn,
}

impl Lib {
    /// Loads `libpmix` and finds its entry points.
    fn load() -> Result<Lib, PmiError> {
        let names: Vec<String> = match std::env::var("STORMPI_PMIX_LIB") {
            Ok(n) if !n.is_empty() => vec![n],
            _ => vec!["libpmix.so.2".into(), "libpmix.so".into()],
        };
        let mut handle: *mut c_void = std::ptr::null_mut();
        for name in &names {
            let Ok(c) = CString::new(name.as_str()) else {
                continue;
            };
            // SAFETY: `c` is a NUL-terminated path. RTLD_GLOBAL because libpmix loads its own
            // plugins, which resolve libpmix's symbols globally.
            handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
            if !handle.is_null() {
                break;
            }
        }
        if handle.is_null() {
            return Err(PmiError::Unsupported(format!(
                "a PMIx launcher started this process (PMIX_NAMESPACE is set), but {} cannot be \
                 loaded: install the PMIx library (Debian: libpmix2) or name it in \
                 STORMPI_PMIX_LIB",
                names.join(" or ")
            )));
        }
        let sym = |name: &'static str| -> Result<*mut c_void, PmiError> {
            let c = CString::new(name).map_err(|_| PmiError::Malformed(name.into()))?;
            // SAFETY: `handle` is a live dlopen handle and `c` a NUL-terminated name.
            let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
            if p.is_null() {
                Err(PmiError::Unsupported(format!(
                    "the PMIx library has no {name}"
                )))
            } else {
                Ok(p)
            }
        };
        // SAFETY: each symbol is the PMIx function of that name, whose C signature is the
        // function type it is cast to (PMIx 3 and later; `pmix.h`).
        unsafe {
            Ok(Lib {
                init: std::mem::transmute::<*mut c_void, InitFn>(sym("PMIx_Init")?),
                finalize: std::mem::transmute::<*mut c_void, FinalizeFn>(sym("PMIx_Finalize")?),
                abort: std::mem::transmute::<*mut c_void, AbortFn>(sym("PMIx_Abort")?),
                put: std::mem::transmute::<*mut c_void, PutFn>(sym("PMIx_Put")?),
                commit: std::mem::transmute::<*mut c_void, CommitFn>(sym("PMIx_Commit")?),
                fence: std::mem::transmute::<*mut c_void, FenceFn>(sym("PMIx_Fence")?),
                get: std::mem::transmute::<*mut c_void, GetFn>(sym("PMIx_Get")?),
                error_string: std::mem::transmute::<*mut c_void, ErrorStringFn>(sym(
                    "PMIx_Error_string",
                )?),
            })
        }
    }

    fn describe(&self, status: c_int) -> String {
        // SAFETY: PMIx_Error_string takes any status and returns a static string or NULL.
        let p = unsafe { (self.error_string)(status) };
        if p.is_null() {
            return format!("PMIx status {status}");
        }
        // SAFETY: a non-NULL result is a NUL-terminated static string.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    fn check(&self, request: &str, status: c_int) -> Result<(), PmiError> {
        if status == 0 {
            Ok(())
        } else {
            Err(PmiError::Refused {
                request: request.into(),
                rc: i64::from(status),
                msg: self.describe(status),
            })
        }
    }
}

/// An `Info` holding `key` = true (the flags PMIx calls take).
fn flag_info(key: &str) -> Info {
    // SAFETY: Info is plain data (arrays, integers, a union of such and raw pointers); all
    // zeroes is a valid, empty value.
    let mut info: Info = unsafe { std::mem::zeroed() };
    for (d, s) in info.key.iter_mut().zip(key.bytes().take(KEY_LEN - 1)) {
        *d = s as c_char;
    }
    info.value.kind = PMIX_BOOL;
    info.value.data.flag = true;
    info
}

/// What a `PMIx_Get` returned, copied out.
enum Got {
    Number(u64),
    Text(String),
    Bytes(Vec<u8>),
}

/// A PMIx session: `PMIx_Init` done, `PMIx_Finalize` at [`Session::finalize`].
pub struct Session {
    lib: Lib,
    me: Proc,
    /// This process's rank.
    pub rank: u32,
    /// Processes in the job.
    pub size: u32,
    /// Application context number.
    pub appnum: u32,
    /// The launcher's universe size, if it says.
    pub universe_size: Option<u32>,
    /// The job's namespace (its id).
    pub nspace: String,
    /// Each rank's node id, if the launcher says.
    pub nodes: Option<Vec<u32>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("pmix::Session")
            .field("nspace", &self.nspace)
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish()
    }
}

// SAFETY: the session holds function pointers into a library loaded for the process's life
// and plain data; PMIx's client calls are thread-safe.
unsafe impl Send for Session {}

impl Session {
    /// Loads libpmix and initializes it; reads the job's size, this process's rank and
    /// application number, and every rank's node.
    pub fn init() -> Result<Session, PmiError> {
        let lib = Lib::load()?;
        // SAFETY: Proc is plain data; zeroes are valid.
        let mut me: Proc = unsafe { std::mem::zeroed() };
        // SAFETY: `me` is writable; no info array is passed.
        let status = unsafe { (lib.init)(&mut me, std::ptr::null_mut(), 0) };
        lib.check("PMIx_Init", status)?;
        // SAFETY: PMIx_Init wrote a NUL-terminated namespace into the array.
        let nspace = unsafe { CStr::from_ptr(me.nspace.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        let mut s = Session {
            lib,
            me,
            rank: me.rank,
            size: 0,
            appnum: 0,
            universe_size: None,
            nspace,
            nodes: None,
        };
        s.size = match s.get_job("pmix.job.size")? {
            Some(Got::Number(n)) if n > 0 && n <= u64::from(u32::MAX) => n as u32,
            _ => {
                return Err(PmiError::Malformed(
                    "the PMIx server gives no job size (pmix.job.size)".into(),
                ))
            }
        };
        if s.rank >= s.size {
            return Err(PmiError::Malformed(format!(
                "PMIx says rank {} of a job of {}",
                s.rank, s.size
            )));
        }
        if let Some(Got::Number(n)) = s.get_of(s.rank, "pmix.appnum")? {
            s.appnum = n as u32;
        }
        if let Some(Got::Number(n)) = s.get_job("pmix.univ.size")? {
            s.universe_size = Some(n as u32);
        }
        s.nodes = s.node_layout()?;
        Ok(s)
    }

    /// Every rank's node: ranks with the same host name (`pmix.hname`, which Slurm gives as the
    /// node's name) share a node; else `pmix.nodeid`; `None` when the server gives neither for
    /// every rank. Host names come first because Slurm answers `pmix.nodeid` only for the ranks
    /// of the asking process's own node.
    fn node_layout(&mut self) -> Result<Option<Vec<u32>>, PmiError> {
        let mut ids = Vec::with_capacity(self.size as usize);
        let mut hosts: Vec<String> = Vec::new();
        for r in 0..self.size {
            let Some(Got::Text(h)) = self.get_of(r, "pmix.hname")? else {
                ids.clear();
                break;
            };
            let id = match hosts.iter().position(|x| *x == h) {
                Some(i) => i,
                None => {
                    hosts.push(h);
                    hosts.len() - 1
                }
            };
            ids.push(id as u32);
        }
        if ids.len() == self.size as usize {
            return Ok(Some(ids));
        }
        for r in 0..self.size {
            match self.get_of(r, "pmix.nodeid")? {
                Some(Got::Number(n)) => ids.push(n as u32),
                _ => return Ok(None),
            }
        }
        Ok(Some(ids))
    }

    fn proc_of(&self, rank: u32) -> Proc {
        Proc { rank, ..self.me }
    }

    fn get_job(&mut self, key: &str) -> Result<Option<Got>, PmiError> {
        self.get_of(RANK_WILDCARD, key)
    }

    /// `PMIx_Get` of `key` for `rank`, copied out; `None` if the server has no such key.
    fn get_of(&mut self, rank: u32, key: &str) -> Result<Option<Got>, PmiError> {
        let proc = self.proc_of(rank);
        let ckey = CString::new(key).map_err(|_| PmiError::InvalidKey {
            key: key.into(),
            reason: "it holds a NUL".into(),
        })?;
        let mut out: *mut Value = std::ptr::null_mut();
        // SAFETY: `proc` and `ckey` are valid for the call; `out` receives a value the library
        // allocates (released below).
        let status = unsafe { (self.lib.get)(&proc, ckey.as_ptr(), std::ptr::null(), 0, &mut out) };
        if status == ERR_NOT_FOUND {
            return Ok(None);
        }
        self.lib.check("PMIx_Get", status)?;
        if out.is_null() {
            return Ok(None);
        }
        // SAFETY: on success `out` points to a value the library allocated with malloc; its
        // `kind` says which union member is live. The strings and byte buffers it owns and the
        // value itself are freed with free(), as PMIX_VALUE_RELEASE does.
        unsafe {
            let v = *out;
            let got = match v.kind {
                PMIX_UINT32 | PMIX_PROC_RANK => Some(Got::Number(u64::from(v.data.uint32))),
                PMIX_UINT16 => Some(Got::Number(u64::from(v.data.uint16))),
                PMIX_STRING if !v.data.string.is_null() => {
                    let s = CStr::from_ptr(v.data.string).to_string_lossy().into_owned();
                    libc::free(v.data.string.cast());
                    Some(Got::Text(s))
                }
                PMIX_BYTE_OBJECT => {
                    let bo = v.data.bo;
                    let bytes = if bo.bytes.is_null() {
                        Vec::new()
                    } else {
                        let b = std::slice::from_raw_parts(bo.bytes.cast::<u8>(), bo.size).to_vec();
                        libc::free(bo.bytes.cast());
                        b
                    };
                    Some(Got::Bytes(bytes))
                }
                _ => None,
            };
            libc::free(out.cast());
            Ok(got)
        }
    }

    /// Publishes `value` under `key` for the whole job (visible after [`Session::fence`]).
    pub fn put(&mut self, key: &str, value: &[u8]) -> Result<(), PmiError> {
        let ckey = CString::new(key).map_err(|_| PmiError::InvalidKey {
            key: key.into(),
            reason: "it holds a NUL".into(),
        })?;
        if key.len() >= KEY_LEN {
            return Err(PmiError::InvalidKey {
                key: key.into(),
                reason: format!("PMIx keys are shorter than {KEY_LEN} bytes"),
            });
        }
        let mut v = Value {
            kind: PMIX_BYTE_OBJECT,
            data: Data {
                bo: ByteObject {
                    bytes: value.as_ptr() as *mut c_char,
                    size: value.len(),
                },
            },
        };
        // SAFETY: PMIx_Put copies the value (the standard says the caller keeps ownership);
        // the byte object points to `value`, alive for the call.
        let status = unsafe { (self.lib.put)(SCOPE_GLOBAL, ckey.as_ptr(), &mut v) };
        self.lib.check("PMIx_Put", status)
    }

    /// Reads what `rank` put under `key`.
    pub fn get(&mut self, rank: u32, key: &str) -> Result<Option<Vec<u8>>, PmiError> {
        Ok(match self.get_of(rank, key)? {
            Some(Got::Bytes(b)) => Some(b),
            Some(Got::Text(t)) => Some(t.into_bytes()),
            _ => None,
        })
    }

    /// Commits this process's puts and waits for the whole job, collecting everyone's data.
    pub fn fence(&mut self) -> Result<(), PmiError> {
        // SAFETY: no arguments.
        let status = unsafe { (self.lib.commit)() };
        self.lib.check("PMIx_Commit", status)?;
        let collect = flag_info("pmix.collect");
        // SAFETY: NULL procs means every process of our namespace; one info of the right layout.
        let status = unsafe { (self.lib.fence)(std::ptr::null(), 0, &collect, 1) };
        self.lib.check("PMIx_Fence", status)
    }

    /// Waits for the whole job (a fence without data).
    pub fn barrier(&mut self) -> Result<(), PmiError> {
        // SAFETY: NULL procs means every process of our namespace; no info.
        let status = unsafe { (self.lib.fence)(std::ptr::null(), 0, std::ptr::null(), 0) };
        self.lib.check("PMIx_Fence", status)
    }

    /// Asks the launcher to abort the job with `code`.
    pub fn abort(&mut self, code: i32, msg: &str) -> Result<(), PmiError> {
        let cmsg = CString::new(msg.replace('\0', " ")).unwrap_or_default();
        // SAFETY: NULL procs means the whole namespace; the message is NUL-terminated.
        let status = unsafe { (self.lib.abort)(code, cmsg.as_ptr(), std::ptr::null_mut(), 0) };
        self.lib.check("PMIx_Abort", status)
    }

    /// Leaves the job.
    pub fn finalize(self) -> Result<(), PmiError> {
        // SAFETY: no info.
        let status = unsafe { (self.lib.finalize)(std::ptr::null(), 0) };
        self.lib.check("PMIx_Finalize", status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_the_standards() {
        assert_eq!(std::mem::size_of::<Proc>(), 260);
        assert_eq!(std::mem::size_of::<Value>(), 32);
        assert_eq!(std::mem::size_of::<Info>(), 552);
        assert_eq!(std::mem::offset_of!(Value, data), 8);
        assert_eq!(std::mem::offset_of!(Info, flags), 512);
        assert_eq!(std::mem::offset_of!(Info, value), 520);
    }

    /// Where the system's PMIx headers are installed, the layouts match what they say.
    #[test]
    fn layouts_match_the_installed_header() {
        let dir = "/usr/lib/x86_64-linux-gnu/pmix2/include";
        if !std::path::Path::new(dir).join("pmix.h").exists() || !cfg!(target_arch = "x86_64") {
            eprintln!("SKIPPED: no pmix.h at {dir}");
            return;
        }
        let tmp = std::env::temp_dir().join(format!("pmix-layout-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        let src = tmp.join("l.c");
        std::fs::write(
            &src,
            "#include <pmix.h>\n#include <stdio.h>\n#include <stddef.h>\nint main(void){printf(\"%zu %zu %zu %zu %zu %zu %d %d %d %d %d %d %d\", sizeof(pmix_proc_t), sizeof(pmix_value_t), sizeof(pmix_info_t), offsetof(pmix_value_t, data), offsetof(pmix_info_t, flags), offsetof(pmix_info_t, value), PMIX_BOOL, PMIX_STRING, PMIX_UINT16, PMIX_UINT32, PMIX_BYTE_OBJECT, PMIX_PROC_RANK, PMIX_ERR_NOT_FOUND);return 0;}\n",
        )
        .unwrap();
        let exe = tmp.join("l");
        let ok = std::process::Command::new("cc")
            .arg(format!("-I{dir}"))
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .status()
            .unwrap()
            .success();
        assert!(ok, "compiling against pmix.h");
        let out = std::process::Command::new(&exe).output().unwrap();
        let _ = std::fs::remove_dir_all(&tmp);
        let want = format!(
            "260 32 552 8 512 520 {PMIX_BOOL} {PMIX_STRING} {PMIX_UINT16} {PMIX_UINT32} \
             {PMIX_BYTE_OBJECT} {PMIX_PROC_RANK} {ERR_NOT_FOUND}"
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), want);
    }
}
