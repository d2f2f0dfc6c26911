//! Info objects (`MPI_Info_*`, the predefined `MPI_INFO_ENV`), communicator hints
//! (`MPI_Comm_set_info`/`get_info`, `MPI_Comm_dup_with_info`) and `MPI_Alloc_mem`/`MPI_Free_mem`.
//!
//! Info objects live in the engine's [`crate::info::InfoTable`]; their handles are direct info
//! handles `index | gen << 16` (`MPI_INFO_ENV` is MPICH's builtin handle). Info functions need an
//! initialised library here (MPI-4 also allows them before `MPI_Init`).
//!
//! Hints: a communicator keeps the hints it was given (`MPI_Comm_set_info`,
//! `MPI_Comm_dup_with_info`; `MPI_Comm_dup` passes them on). The four assertions stormpi acts on
//! ([`crate::comm::hints`]) become flags on the communicator, and `MPI_Comm_get_info` returns
//! exactly those in force, each as "true"; other keys are kept but not returned.

use core::ffi::{c_char, c_int, c_void, CStr};

use super::abi::{self, HandleKind, ObjectKind};
use super::env::{code, run, run_comm, run_comm_inside};
use super::handles::out;
use crate::api::ENGINE;
use crate::comm::hints::{CommHints, HINT_KEYS};
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::info::{InfoId, INFO_GENS, MAX_KEY, MAX_VALUE};

/// Gives new communicator `c` the assertions info handle `info` names (none for
/// `MPI_INFO_NULL`) and keeps `info`'s hints for it: the constructors that take an info
/// (`MPI_Comm_split_type`, `MPI_Comm_create_from_group`).
pub(super) fn new_comm_hints(
    e: &mut crate::engine::Engine,
    c: crate::comm::CommId,
    info: abi::MPI_Info,
) -> Result<()> {
    let Some(i) = info_or_null(info)? else {
        return Ok(());
    };
    let flags = hints_from(&e.objects.infos, CommHints::empty(), i)?;
    e.p2p.set_hints(c, flags)?;
    // Hints may be ignored: when there is no room to keep them, they are dropped.
    e.objects.infos.set_comm_hints(c.0, Some(i)).map(|_| ())
}

/// `base` updated by the assertion keys of info object `id` (`MPI_Comm_set_info` leaves the
/// hints `id` does not name as they were).
pub(super) fn hints_from(
    infos: &crate::info::InfoTable,
    base: CommHints,
    id: InfoId,
) -> Result<CommHints> {
    let mut h = base;
    for (key, _) in HINT_KEYS {
        if let Some(v) = infos.get(id, key)? {
            h = h.with(key, v);
        }
    }
    Ok(h)
}

const INFO_DIRECT: c_int = abi::make_handle(HandleKind::Direct, ObjectKind::Info, 0);

fn bad_info() -> Error {
    Error::new(
        ErrorClass::Info,
        Reason::BadArgument {
            what: "not a valid info object",
        },
    )
}

/// The info object a handle names (`MPI_INFO_NULL` is not one).
pub(super) fn info(h: abi::MPI_Info) -> Result<InfoId> {
    if h == abi::MPI_INFO_ENV {
        return Ok(InfoId::ENV);
    }
    if abi::handle_kind(h) != HandleKind::Direct || abi::handle_object(h) != Some(ObjectKind::Info)
    {
        return Err(bad_info());
    }
    let i = abi::handle_index(h);
    Ok(InfoId {
        index: (i & 0xffff) as u16,
        gen: ((i >> 16) as u16) % INFO_GENS,
    })
}

/// An info argument that may be `MPI_INFO_NULL`.
pub(crate) fn info_or_null(h: abi::MPI_Info) -> Result<Option<InfoId>> {
    match h {
        abi::MPI_INFO_NULL => Ok(None),
        _ => info(h).map(Some),
    }
}

/// The handle of info object `id`.
pub(super) fn info_handle(id: InfoId) -> abi::MPI_Info {
    if id == InfoId::ENV {
        return abi::MPI_INFO_ENV;
    }
    INFO_DIRECT | (c_int::from(id.gen) << 16) | c_int::from(id.index)
}

/// A key argument (a C string).
unsafe fn key<'a>(p: *const c_char) -> Result<&'a [u8]> {
    if p.is_null() {
        return Err(Error::new(
            ErrorClass::InfoKey,
            Reason::BadArgument {
                what: "key is NULL",
            },
        ));
    }
    // SAFETY: MPI requires a NUL-terminated string.
    Ok(unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// The name of the machine architecture, for `MPI_INFO_ENV`'s `arch`.
fn arch_name() -> &'static str {
    if cfg!(target_arch = "x86_64") {
        "x86_64"
    } else if cfg!(target_arch = "x86") {
        "i686"
    } else if cfg!(target_arch = "aarch64") {
        "aarch64"
    } else if cfg!(target_arch = "s390x") {
        "s390x"
    } else if cfg!(target_arch = "powerpc64") {
        "ppc64"
    } else if cfg!(target_arch = "riscv64") {
        "riscv64"
    } else {
        "unknown"
    }
}

/// Fills `MPI_INFO_ENV` at `MPI_Init` with what the library knows of the start: `command`,
/// `argv` and `wdir` (from the platform, when it knows them), `maxprocs`, `host`, `arch` and
/// `thread_level`. (`soft` and `file` describe `mpiexec` options stormrun does not have.)
pub(crate) fn fill_env(thread_level: c_int) {
    let Some(mut cx) = ENGINE.enter() else { return };
    let e = cx.e();
    let mut buf = [0u8; MAX_VALUE];
    let platform = e.platform();
    for k in ["command", "argv", "wdir"] {
        if let Some(n) = platform.env_info(k, &mut buf) {
            let _ = e
                .objects
                .infos
                .set_env(k.as_bytes(), &buf[..n.min(MAX_VALUE)]);
        }
    }
    let mut num: heapless::String<16> = heapless::String::new();
    let _ = core::fmt::write(&mut num, format_args!("{}", e.size()));
    let _ = e.objects.infos.set_env(b"maxprocs", num.as_bytes());
    let n = e.processor_name(&mut buf[..abi::MPI_MAX_PROCESSOR_NAME as usize]);
    let _ = e.objects.infos.set_env(b"host", &buf[..n]);
    let _ = e.objects.infos.set_env(b"arch", arch_name().as_bytes());
    let level: &[u8] = match thread_level {
        abi::MPI_THREAD_SINGLE => b"MPI_THREAD_SINGLE",
        abi::MPI_THREAD_FUNNELED => b"MPI_THREAD_FUNNELED",
        abi::MPI_THREAD_SERIALIZED => b"MPI_THREAD_SERIALIZED",
        _ => b"MPI_THREAD_MULTIPLE",
    };
    let _ = e.objects.infos.set_env(b"thread_level", level);
}

/// Copies `value` into a C buffer of `cap` bytes plus its NUL (cut to fit).
unsafe fn put_value(value: &[u8], out: *mut c_char, cap: usize) {
    let n = value.len().min(cap);
    // SAFETY: the caller's contract: `out` holds `cap + 1` bytes.
    unsafe {
        core::ptr::copy_nonoverlapping(value.as_ptr(), out.cast::<u8>(), n);
        *out.add(n) = 0;
    }
}

super::mpi! {
    fn MPI_Info_create / PMPI_Info_create(info_: *mut abi::MPI_Info) {
        code(run("MPI_Info_create", None, |e| {
            if info_.is_null() {
                return Err(Error::bad_arg("info is NULL"));
            }
            let id = e.objects.infos.create()?;
            // SAFETY: checked non-null; MPI requires it to point to an MPI_Info.
            unsafe { out(info_, info_handle(id)) }
        }))
    }

    fn MPI_Info_create_env / PMPI_Info_create_env(argc: c_int, argv: *mut *mut c_char, info_: *mut abi::MPI_Info) {
        code(run("MPI_Info_create_env", None, |e| {
            if info_.is_null() {
                return Err(Error::bad_arg("info is NULL"));
            }
            let id = e.objects.infos.dup(InfoId::ENV)?;
            if argc > 0 && !argv.is_null() {
                // The arguments given win over what the platform said at MPI_Init.
                let mut args: heapless::Vec<u8, MAX_VALUE> = heapless::Vec::new();
                for i in 0..argc as usize {
                    // SAFETY: MPI requires `argv` to hold `argc` strings (as main's does).
                    let a = unsafe { *argv.add(i) };
                    if a.is_null() {
                        break;
                    }
                    // SAFETY: as above.
                    let s = unsafe { CStr::from_ptr(a) }.to_bytes();
                    if i == 0 {
                        e.objects.infos.set(id, b"command", &s[..s.len().min(MAX_VALUE)])?;
                        continue;
                    }
                    if i > 1 {
                        let _ = args.push(b' ');
                    }
                    let room = args.capacity() - args.len();
                    let _ = args.extend_from_slice(&s[..s.len().min(room)]);
                }
                if argc > 1 {
                    e.objects.infos.set(id, b"argv", &args)?;
                }
            }
            // SAFETY: checked non-null; MPI requires it to point to an MPI_Info.
            unsafe { out(info_, info_handle(id)) }
        }))
    }

    fn MPI_Info_free / PMPI_Info_free(info_: *mut abi::MPI_Info) {
        code(run("MPI_Info_free", None, |e| {
            if info_.is_null() {
                return Err(Error::bad_arg("info is NULL"));
            }
            // SAFETY: checked non-null; MPI requires it to point to an MPI_Info.
            e.objects.infos.free(info(unsafe { *info_ })?)?;
            // SAFETY: as above.
            unsafe { *info_ = abi::MPI_INFO_NULL };
            Ok(())
        }))
    }

    fn MPI_Info_dup / PMPI_Info_dup(info_: abi::MPI_Info, newinfo: *mut abi::MPI_Info) {
        code(run("MPI_Info_dup", None, |e| {
            let id = info(info_)?;
            if newinfo.is_null() {
                return Err(Error::bad_arg("newinfo is NULL"));
            }
            let new = e.objects.infos.dup(id)?;
            // SAFETY: checked non-null; MPI requires it to point to an MPI_Info.
            unsafe { out(newinfo, info_handle(new)) }
        }))
    }

    fn MPI_Info_set / PMPI_Info_set(info_: abi::MPI_Info, key_: *const c_char, value: *const c_char) {
        code(run("MPI_Info_set", None, |e| {
            let id = info(info_)?;
            // SAFETY: MPI requires C strings.
            let k = unsafe { key(key_)? };
            if value.is_null() {
                return Err(Error::new(ErrorClass::InfoValue, Reason::BadArgument { what: "value is NULL" }));
            }
            // SAFETY: MPI requires a NUL-terminated string.
            let v = unsafe { CStr::from_ptr(value) }.to_bytes();
            e.objects.infos.set(id, k, v)
        }))
    }

    fn MPI_Info_delete / PMPI_Info_delete(info_: abi::MPI_Info, key_: *const c_char) {
        code(run("MPI_Info_delete", None, |e| {
            let id = info(info_)?;
            // SAFETY: MPI requires a C string.
            let k = unsafe { key(key_)? };
            e.objects.infos.delete(id, k)
        }))
    }

    fn MPI_Info_get / PMPI_Info_get(info_: abi::MPI_Info, key_: *const c_char, valuelen: c_int, value: *mut c_char, flag: *mut c_int) {
        code(run("MPI_Info_get", None, |e| {
            let id = info(info_)?;
            // SAFETY: MPI requires a C string.
            let k = unsafe { key(key_)? };
            if valuelen < 0 {
                return Err(Error::bad_arg("valuelen is negative"));
            }
            let v = e.objects.infos.get(id, k)?;
            if v.is_some() && value.is_null() {
                return Err(Error::bad_arg("value is NULL"));
            }
            // SAFETY: MPI requires `flag` to point to an int and `value` to hold valuelen + 1
            // chars.
            unsafe {
                out(flag, v.is_some() as c_int)?;
                if let Some(v) = v {
                    put_value(v, value, valuelen as usize);
                }
            }
            Ok(())
        }))
    }

    fn MPI_Info_get_valuelen / PMPI_Info_get_valuelen(info_: abi::MPI_Info, key_: *const c_char, valuelen: *mut c_int, flag: *mut c_int) {
        code(run("MPI_Info_get_valuelen", None, |e| {
            let id = info(info_)?;
            // SAFETY: MPI requires a C string.
            let k = unsafe { key(key_)? };
            let v = e.objects.infos.get(id, k)?;
            // SAFETY: MPI requires both to point to ints.
            unsafe {
                out(flag, v.is_some() as c_int)?;
                if let Some(v) = v {
                    out(valuelen, v.len() as c_int)?;
                }
            }
            Ok(())
        }))
    }

    fn MPI_Info_get_string / PMPI_Info_get_string(info_: abi::MPI_Info, key_: *const c_char, buflen: *mut c_int, value: *mut c_char, flag: *mut c_int) {
        code(run("MPI_Info_get_string", None, |e| {
            let id = info(info_)?;
            // SAFETY: MPI requires a C string.
            let k = unsafe { key(key_)? };
            if buflen.is_null() {
                return Err(Error::bad_arg("buflen is NULL"));
            }
            // SAFETY: checked non-null; MPI requires it to point to an int.
            let cap = unsafe { *buflen };
            if cap < 0 {
                return Err(Error::bad_arg("*buflen is negative"));
            }
            let v = e.objects.infos.get(id, k)?;
            // SAFETY: MPI requires `flag` to point to an int and `value` to hold *buflen chars.
            unsafe {
                out(flag, v.is_some() as c_int)?;
                if let Some(v) = v {
                    if cap > 0 {
                        if value.is_null() {
                            return Err(Error::bad_arg("value is NULL"));
                        }
                        put_value(v, value, cap as usize - 1);
                    }
                    *buflen = v.len() as c_int + 1;
                }
            }
            Ok(())
        }))
    }

    fn MPI_Info_get_nkeys / PMPI_Info_get_nkeys(info_: abi::MPI_Info, nkeys: *mut c_int) {
        code(run("MPI_Info_get_nkeys", None, |e| {
            let n = e.objects.infos.nkeys(info(info_)?)?;
            // SAFETY: MPI requires `nkeys` to point to an int.
            unsafe { out(nkeys, n as c_int) }
        }))
    }

    fn MPI_Info_get_nthkey / PMPI_Info_get_nthkey(info_: abi::MPI_Info, n: c_int, key_: *mut c_char) {
        code(run("MPI_Info_get_nthkey", None, |e| {
            let id = info(info_)?;
            if n < 0 {
                return Err(Error::bad_arg("n is negative"));
            }
            let k = e.objects.infos.nthkey(id, n as usize)?;
            if key_.is_null() {
                return Err(Error::bad_arg("key is NULL"));
            }
            // SAFETY: MPI requires `key` to hold MPI_MAX_INFO_KEY chars and the NUL.
            unsafe { put_value(k, key_, MAX_KEY) };
            Ok(())
        }))
    }

    fn MPI_Comm_set_info / PMPI_Comm_set_info(comm: abi::MPI_Comm, info_: abi::MPI_Info) {
        code(run_comm("MPI_Comm_set_info", comm, |e, c| {
            let old = e.comm(c)?.hints;
            let hints = info_or_null(info_)?;
            if let Some(i) = hints {
                let new = hints_from(&e.objects.infos, old, i)?;
                e.p2p.set_hints(c, new)?;
            }
            // Hints may be ignored: when there is no room to keep them, they are dropped.
            e.objects.infos.set_comm_hints(c.0, hints).map(|_| ())
        }))
    }

    fn MPI_Comm_get_info / PMPI_Comm_get_info(comm: abi::MPI_Comm, info_used: *mut abi::MPI_Info) {
        code(run_comm("MPI_Comm_get_info", comm, |e, c| {
            let hints = e.comm(c)?.hints;
            if info_used.is_null() {
                return Err(Error::bad_arg("info_used is NULL"));
            }
            let id = e.objects.infos.create()?;
            for (key, flag) in HINT_KEYS {
                if hints.contains(flag) {
                    if let Err(err) = e.objects.infos.set(id, key, b"true") {
                        let _ = e.objects.infos.free(id);
                        return Err(err);
                    }
                }
            }
            // SAFETY: checked non-null; MPI requires it to point to an MPI_Info.
            unsafe { out(info_used, info_handle(id)) }
        }))
    }

    fn MPI_Comm_dup_with_info / PMPI_Comm_dup_with_info(comm: abi::MPI_Comm, info_: abi::MPI_Info, newcomm: *mut abi::MPI_Comm) {
        let r = run_comm_inside("MPI_Comm_dup_with_info", comm, |cx, c| {
            if newcomm.is_null() {
                return Err(Error::bad_arg("newcomm is NULL"));
            }
            let hints = info_or_null(info_)?;
            if let Some(h) = hints {
                cx.e().objects.infos.check(h)?;
            }
            Ok((c, hints, crate::comm::create::dup(cx, c)?))
        });
        match r {
            // SAFETY: `newcomm` was checked non-null.
            Ok((c, hints, new)) => unsafe { super::attr::comm_duplicated("MPI_Comm_dup_with_info", c, new, super::attr::Hints::Set(hints), newcomm) },
            Err(code) => code,
        }
    }

    fn MPI_Alloc_mem / PMPI_Alloc_mem(size: abi::MPI_Aint, info_: abi::MPI_Info, baseptr: *mut c_void) {
        code(run("MPI_Alloc_mem", None, |e| {
            if size < 0 {
                return Err(Error::bad_arg("size is negative"));
            }
            if let Some(id) = info_or_null(info_)? {
                e.objects.infos.check(id)?;
            }
            if baseptr.is_null() {
                return Err(Error::bad_arg("baseptr is NULL"));
            }
            let p = e.platform().alloc_mem(size as usize).ok_or(Error::new(
                ErrorClass::NoMem,
                Reason::BadArgument { what: "the platform could not provide that much memory" },
            ))?;
            // SAFETY: checked non-null; MPI requires it to point to a `void *`.
            unsafe { out(baseptr.cast::<*mut u8>(), p) }
        }))
    }

    fn MPI_Free_mem / PMPI_Free_mem(base: *mut c_void) {
        if base.is_null() {
            return abi::MPI_SUCCESS;
        }
        code(run("MPI_Free_mem", None, |e| {
            // SAFETY: MPI requires `base` to come from MPI_Alloc_mem and not be freed yet.
            unsafe { e.platform().free_mem(base.cast()) };
            Ok(())
        }))
    }
}

// The core's limits are the header's.
const _: () = assert!(
    MAX_VALUE == abi::MPI_MAX_INFO_VAL as usize && MAX_KEY == abi::MPI_MAX_INFO_KEY as usize
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_handles_round_trip() {
        assert_eq!(info(abi::MPI_INFO_ENV).unwrap(), InfoId::ENV);
        assert_eq!(info_handle(InfoId::ENV), abi::MPI_INFO_ENV);
        for (index, gen) in [(1, 0), (77, 1023), (65535, 5)] {
            let id = InfoId { index, gen };
            let h = info_handle(id);
            assert_eq!(abi::handle_object(h), Some(ObjectKind::Info));
            assert_ne!(h, abi::MPI_INFO_NULL);
            assert_eq!(info(h).unwrap(), id);
        }
        assert_eq!(
            info(abi::MPI_INFO_NULL).unwrap_err().class,
            ErrorClass::Info
        );
        assert_eq!(
            info(abi::MPI_COMM_WORLD).unwrap_err().class,
            ErrorClass::Info
        );
        assert_eq!(info_or_null(abi::MPI_INFO_NULL).unwrap(), None);
    }
}
