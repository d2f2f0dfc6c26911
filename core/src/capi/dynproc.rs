//! Dynamic processes: name publishing (`MPI_Publish_name`, `MPI_Lookup_name`,
//! `MPI_Unpublish_name`) through the runtime's name service — under stormrun, its PMI server
//! keeps one table for every process it started — and ports (`MPI_Open_port`,
//! `MPI_Close_port`) through the platform's [`Ports`](crate::dpm::Ports).
//!
//! `MPI_Comm_accept`/`MPI_Comm_connect` make an intercommunicator with another job
//! ([`crate::comm::create::connect_accept`]), as does `MPI_Comm_join` over a connected socket.
//! `MPI_Comm_spawn`/`MPI_Comm_spawn_multiple` start a new job through the runtime and meet it
//! the same way ([`crate::comm::create::spawn`]).

use core::ffi::{c_char, c_int, CStr};

use super::abi;
use super::env::{code, run, run_comm_inside};
use super::handles::{self, out};
use crate::comm::create::Meet;
use crate::comm::create::SpawnArgs;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::info::InfoId;

/// Longest service or port name, in bytes, without the NUL.
const MAX_NAME: usize = abi::MPI_MAX_PORT_NAME as usize - 1;

/// A service or port name argument: a C string of at most [`MAX_NAME`] bytes of UTF-8 with no
/// line break (names travel in the runtime's line protocol).
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string.
unsafe fn name_arg<'a>(p: *const c_char, class: ErrorClass, what: &'static str) -> Result<&'a str> {
    let bad = |what| Error::new(class, Reason::BadArgument { what });
    if p.is_null() {
        return Err(bad(what));
    }
    // SAFETY: non-null, and MPI requires a NUL-terminated string.
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    let text = core::str::from_utf8(bytes)
        .map_err(|_| bad("a service or port name is not valid UTF-8"))?;
    if text.is_empty() || text.len() > MAX_NAME {
        return Err(bad(
            "a service or port name is empty or longer than MPI_MAX_PORT_NAME - 1 bytes",
        ));
    }
    if text.contains(['\n', '\r']) {
        return Err(bad("a service or port name holds a line break"));
    }
    Ok(text)
}

/// Checks an info argument (names take no hints: the info is only validated).
fn check_info(e: &mut crate::engine::Engine, info: abi::MPI_Info) -> Result<()> {
    if let Some(i) = super::info::info_or_null(info)? {
        e.objects.infos.check(i)?;
    }
    Ok(())
}

/// The platform's ports, or `MPI_ERR_UNSUPPORTED_OPERATION` on a platform without a network.
fn ports(e: &crate::engine::Engine) -> Result<&'static dyn crate::dpm::Ports> {
    e.platform()
        .ports()
        .ok_or(Error::unsupported("ports on a platform without a network"))
}

/// `MPI_Comm_accept` (`accept`) or `MPI_Comm_connect`.
///
/// # Safety
/// `port_name` is NULL or a NUL-terminated string; `newcomm` NULL or an `MPI_Comm` to write.
unsafe fn meet(
    func: &'static str,
    port_name: *const c_char,
    info: abi::MPI_Info,
    root: c_int,
    comm: abi::MPI_Comm,
    newcomm: *mut abi::MPI_Comm,
    accept: bool,
) -> c_int {
    code(run_comm_inside(func, comm, |cx, c| {
        if newcomm.is_null() {
            return Err(Error::bad_arg("newcomm is NULL"));
        }
        let e = cx.e();
        // The port name and info matter at the root only.
        let rank = e.comm(c)?.rank as c_int;
        let port = if rank == root {
            check_info(e, info)?;
            // SAFETY: the caller's contract; `name_arg` refuses NULL.
            Some(unsafe { name_arg(port_name, ErrorClass::Port, "port_name is NULL") }?.as_bytes())
        } else {
            None
        };
        let how = port.map(|p| {
            if accept {
                Meet::Accept(p)
            } else {
                Meet::Connect(p)
            }
        });
        let timeout_ms = u64::from(e.params().u32(&crate::engine::DPM_TIMEOUT)) * 1000;
        let new = crate::comm::create::connect_accept(cx, c, root, how, timeout_ms)?;
        // SAFETY: checked non-null; MPI requires it to point to an MPI_Comm.
        unsafe { out(newcomm, handles::comm_handle(new)) }
    }))
}

/// A spawn request read from the C arguments at the root: `n` commands, each with a
/// NULL-terminated argument vector (or none), a process count and an info.
struct CSpawn {
    n: usize,
    commands: *const *const c_char,
    /// `MPI_ARGVS_NULL` (NULL) or `n` argument vectors, each NULL or NULL-terminated.
    argvs: *const *const *const c_char,
    maxprocs: *const c_int,
    infos: *const abi::MPI_Info,
}

/// A C string argument of a spawn request as UTF-8.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string.
unsafe fn spawn_str<'a>(p: *const c_char, what: &'static str) -> Result<&'a str> {
    if p.is_null() {
        return Err(Error::bad_arg(what));
    }
    // SAFETY: non-null, and MPI requires a NUL-terminated string.
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    core::str::from_utf8(bytes)
        .map_err(|_| Error::bad_arg("a spawn command or argument is not valid UTF-8"))
}

impl SpawnArgs for CSpawn {
    fn commands(&self) -> usize {
        self.n
    }

    fn command(&self, i: usize) -> Result<&str> {
        // SAFETY: `i < n` and MPI requires `n` command pointers.
        let p = unsafe { *self.commands.add(i) };
        // SAFETY: MPI requires each command to be a NUL-terminated string.
        let c = unsafe { spawn_str(p, "a command to spawn is NULL") }?;
        if c.is_empty() {
            return Err(Error::bad_arg("a command to spawn is empty"));
        }
        Ok(c)
    }

    fn args(&self, i: usize, each: &mut dyn FnMut(&str) -> Result<()>) -> Result<()> {
        if self.argvs.is_null() {
            return Ok(());
        }
        // SAFETY: `i < n` and a non-null `argvs` holds `n` vectors.
        let argv = unsafe { *self.argvs.add(i) };
        if argv.is_null() {
            return Ok(());
        }
        for k in 0.. {
            // SAFETY: MPI requires the vector to end with a NULL entry; we stop there.
            let a = unsafe { *argv.add(k) };
            if a.is_null() {
                break;
            }
            // SAFETY: a non-null entry is a NUL-terminated string.
            each(unsafe { spawn_str(a, "a spawn argument is NULL") }?)?;
        }
        Ok(())
    }

    fn maxprocs(&self, i: usize) -> u32 {
        // SAFETY: `i < n` and MPI requires `n` counts.
        let n = unsafe { *self.maxprocs.add(i) };
        n.max(0) as u32
    }

    fn info(&self, i: usize) -> Result<Option<InfoId>> {
        // SAFETY: `i < n` and MPI requires `n` info handles.
        super::info::info_or_null(unsafe { *self.infos.add(i) })
    }
}

/// The body of `MPI_Comm_spawn` (`n` = 1) and `MPI_Comm_spawn_multiple`; the arrays matter at
/// the root only. `errcodes` is NULL (`MPI_ERRCODES_IGNORE`) or takes one code per process.
///
/// # Safety
/// MPI's contract for the arguments: at the root, `n` commands, argument vectors (or NULL),
/// counts and infos; `intercomm` NULL or an `MPI_Comm` to write.
#[allow(clippy::too_many_arguments)]
unsafe fn spawn(
    func: &'static str,
    n: c_int,
    commands: *const *const c_char,
    argvs: *const *const *const c_char,
    maxprocs: *const c_int,
    infos: *const abi::MPI_Info,
    root: c_int,
    comm: abi::MPI_Comm,
    intercomm: *mut abi::MPI_Comm,
    errcodes: *mut c_int,
) -> c_int {
    code(run_comm_inside(func, comm, |cx, c| {
        if intercomm.is_null() {
            return Err(Error::bad_arg("intercomm is NULL"));
        }
        let at_root = cx.e().comm(c)?.rank as c_int == root;
        if at_root && (n <= 0 || commands.is_null() || maxprocs.is_null() || infos.is_null()) {
            return Err(Error::bad_arg(
                "count, the commands, maxprocs or the infos are missing",
            ));
        }
        let timeout_ms = u64::from(cx.e().params().u32(&crate::engine::DPM_TIMEOUT)) * 1000;
        let req = at_root.then_some(CSpawn {
            n: n as usize,
            commands,
            argvs,
            maxprocs,
            infos,
        });
        let req = req.as_ref().map(|r| r as &dyn SpawnArgs);
        let (total, r) = crate::comm::create::spawn(cx, c, root, req, timeout_ms);
        let fill = match &r {
            Ok(_) => abi::MPI_SUCCESS,
            Err(e) => e.class as c_int,
        };
        if !errcodes.is_null() {
            for i in 0..total as usize {
                // SAFETY: MPI requires one code per process asked for.
                unsafe { *errcodes.add(i) = fill };
            }
        }
        // SAFETY: checked non-null; MPI requires it to point to an MPI_Comm.
        unsafe { out(intercomm, handles::comm_handle(r?)) }
    }))
}

super::mpi! {
    fn MPI_Comm_spawn / PMPI_Comm_spawn(command: *const c_char, argv: *mut *mut c_char, maxprocs: c_int, info: abi::MPI_Info, root: c_int, comm: abi::MPI_Comm, intercomm: *mut abi::MPI_Comm, array_of_errcodes: *mut c_int) {
        let commands = [command];
        let argvs = [argv as *const *const c_char];
        let counts = [maxprocs];
        let infos = [info];
        // SAFETY: MPI's contract for the arguments; the one-element arrays live for the call.
        unsafe { spawn("MPI_Comm_spawn", 1, commands.as_ptr(), argvs.as_ptr(), counts.as_ptr(), infos.as_ptr(), root, comm, intercomm, array_of_errcodes) }
    }

    fn MPI_Comm_spawn_multiple / PMPI_Comm_spawn_multiple(count: c_int, array_of_commands: *mut *mut c_char, array_of_argv: *mut *mut *mut c_char, array_of_maxprocs: *const c_int, array_of_info: *const abi::MPI_Info, root: c_int, comm: abi::MPI_Comm, intercomm: *mut abi::MPI_Comm, array_of_errcodes: *mut c_int) {
        // SAFETY: MPI's contract for the arguments.
        unsafe { spawn("MPI_Comm_spawn_multiple", count, array_of_commands as *const *const c_char, array_of_argv as *const *const *const c_char, array_of_maxprocs, array_of_info, root, comm, intercomm, array_of_errcodes) }
    }

    fn MPI_Comm_accept / PMPI_Comm_accept(port_name: *const c_char, info: abi::MPI_Info, root: c_int, comm: abi::MPI_Comm, newcomm: *mut abi::MPI_Comm) {
        // SAFETY: MPI's contract for the arguments.
        unsafe { meet("MPI_Comm_accept", port_name, info, root, comm, newcomm, true) }
    }

    fn MPI_Comm_connect / PMPI_Comm_connect(port_name: *const c_char, info: abi::MPI_Info, root: c_int, comm: abi::MPI_Comm, newcomm: *mut abi::MPI_Comm) {
        // SAFETY: MPI's contract for the arguments.
        unsafe { meet("MPI_Comm_connect", port_name, info, root, comm, newcomm, false) }
    }

    fn MPI_Comm_join / PMPI_Comm_join(fd: c_int, intercomm: *mut abi::MPI_Comm) {
        code(run_comm_inside("MPI_Comm_join", abi::MPI_COMM_SELF, |cx, c| {
            if intercomm.is_null() {
                return Err(Error::bad_arg("intercomm is NULL"));
            }
            if fd < 0 {
                return Err(Error::bad_arg("fd is not a file descriptor"));
            }
            let timeout_ms = u64::from(cx.e().params().u32(&crate::engine::DPM_TIMEOUT)) * 1000;
            let new = crate::comm::create::connect_accept(cx, c, 0, Some(Meet::Join(fd)), timeout_ms)?;
            // SAFETY: checked non-null; MPI requires it to point to an MPI_Comm.
            unsafe { out(intercomm, handles::comm_handle(new)) }
        }))
    }

    fn MPI_Open_port / PMPI_Open_port(info: abi::MPI_Info, port_name: *mut c_char) {
        code(run("MPI_Open_port", None, |e| {
            if port_name.is_null() {
                return Err(Error::bad_arg("port_name is NULL"));
            }
            check_info(e, info)?;
            let mut buf = [0u8; MAX_NAME];
            let n = ports(e)?.open(&mut buf)?.min(MAX_NAME);
            // SAFETY: MPI requires `port_name` to hold MPI_MAX_PORT_NAME bytes; `n` plus the
            // NUL fit.
            unsafe { super::errors::write_bytes(&buf[..n], port_name, MAX_NAME + 1, core::ptr::null_mut()) };
            Ok(())
        }))
    }

    fn MPI_Close_port / PMPI_Close_port(port_name: *const c_char) {
        code(run("MPI_Close_port", None, |e| {
            // SAFETY: MPI's contract for the string; `name_arg` refuses NULL.
            let name = unsafe { name_arg(port_name, ErrorClass::Port, "port_name is NULL") }?;
            ports(e)?.close(name.as_bytes())
        }))
    }

    fn MPI_Publish_name / PMPI_Publish_name(service_name: *const c_char, info: abi::MPI_Info, port_name: *const c_char) {
        code(run("MPI_Publish_name", None, |e| {
            // SAFETY: MPI's contract for the strings; `name_arg` refuses NULL.
            let service = unsafe { name_arg(service_name, ErrorClass::Service, "service_name is NULL") }?;
            // SAFETY: as above.
            let port = unsafe { name_arg(port_name, ErrorClass::Port, "port_name is NULL") }?;
            check_info(e, info)?;
            e.publish_name(service, port)
        }))
    }

    fn MPI_Lookup_name / PMPI_Lookup_name(service_name: *const c_char, info: abi::MPI_Info, port_name: *mut c_char) {
        code(run("MPI_Lookup_name", None, |e| {
            // SAFETY: MPI's contract for the string; `name_arg` refuses NULL.
            let service = unsafe { name_arg(service_name, ErrorClass::Name, "service_name is NULL") }?;
            if port_name.is_null() {
                return Err(Error::bad_arg("port_name is NULL"));
            }
            check_info(e, info)?;
            let mut buf = [0u8; MAX_NAME];
            let n = e.lookup_name(service, &mut buf)?.min(MAX_NAME);
            // SAFETY: MPI requires `port_name` to hold MPI_MAX_PORT_NAME bytes; `n` plus the
            // NUL fit.
            unsafe { super::errors::write_bytes(&buf[..n], port_name, MAX_NAME + 1, core::ptr::null_mut()) };
            Ok(())
        }))
    }

    fn MPI_Unpublish_name / PMPI_Unpublish_name(service_name: *const c_char, info: abi::MPI_Info, port_name: *const c_char) {
        code(run("MPI_Unpublish_name", None, |e| {
            // SAFETY: MPI's contract for the strings; `name_arg` refuses NULL.
            let service = unsafe { name_arg(service_name, ErrorClass::Service, "service_name is NULL") }?;
            // The port is checked as an argument; the name service keys on the service alone.
            // SAFETY: as above.
            unsafe { name_arg(port_name, ErrorClass::Port, "port_name is NULL") }?;
            check_info(e, info)?;
            e.unpublish_name(service)
        }))
    }
}
