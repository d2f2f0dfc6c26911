//! Dynamic processes: name publishing (`MPI_Publish_name`, `MPI_Lookup_name`,
//! `MPI_Unpublish_name`) through the runtime's name service — under stormrun, its PMI server
//! keeps one table for every process it started — and ports (`MPI_Open_port`,
//! `MPI_Close_port`) through the platform's [`Ports`](crate::dpm::Ports).
//!
//! `MPI_Comm_accept`/`MPI_Comm_connect` make an intercommunicator with another job
//! ([`crate::comm::create::connect_accept`]), as does `MPI_Comm_join` over a connected socket.
//! Spawn is not built yet (it stays in `unsupported`).

use core::ffi::{c_char, c_int, CStr};

use super::abi;
use super::env::{code, run, run_comm_inside};
use super::handles::{self, out};
use crate::comm::create::Meet;
use crate::error::{Error, ErrorClass, Reason, Result};

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

super::mpi! {
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
