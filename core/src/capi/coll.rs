//! Collective operations.

use core::ffi::{c_int, c_void};

use super::abi;
use super::env::{code, run_comm};
use super::errors::report;
use super::handles::{self, buffer};
use super::p2p::{bytes, bytes_mut};
use crate::error::{Error, ErrorClass, Reason};

fn in_place(p: *const c_void) -> bool {
    core::ptr::eq(p, abi::MPI_IN_PLACE)
}

super::mpi! {
    fn MPI_Barrier / PMPI_Barrier(comm: abi::MPI_Comm) {
        code(run_comm("MPI_Barrier", comm, |e, c| e.barrier(c)))
    }

    fn MPI_Bcast / PMPI_Bcast(buf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm) {
        code(run_comm("MPI_Bcast", comm, |e, c| {
            let (d, n) = handles::typed(e, buf, count, datatype)?;
            // SAFETY: MPI requires the buffer to hold `count` instances of the type.
            unsafe { e.bcast(buf.cast(), n, d, root, c) }
        }))
    }

    fn MPI_Reduce / PMPI_Reduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, root: c_int, comm: abi::MPI_Comm) {
        code(run_comm("MPI_Reduce", comm, |e, c| {
            let op = handles::op(op)?;
            let is_root = e.comm(c)?.rank as c_int == root;
            let (d, n) = buffer(if in_place(sendbuf) { recvbuf } else { sendbuf }, count, datatype)?;
            // SAFETY: `buffer` validated the descriptions of the user's buffers.
            let input = (!in_place(sendbuf)).then(|| unsafe { bytes(sendbuf, n) });
            let output = if is_root {
                buffer(recvbuf, count, datatype)?;
                // SAFETY: as above; the root's receive buffer holds `count` elements.
                Some(unsafe { bytes_mut(recvbuf, n) })
            } else {
                None
            };
            e.reduce(input, output, count as usize, d, op, root, c)
        }))
    }

    fn MPI_Allreduce / PMPI_Allreduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm) {
        code(run_comm("MPI_Allreduce", comm, |e, c| {
            let op = handles::op(op)?;
            let (d, n) = buffer(recvbuf, count, datatype)?;
            if !in_place(sendbuf) {
                buffer(sendbuf, count, datatype)?;
            }
            // SAFETY: `buffer` validated the descriptions of the user's buffers.
            let input = (!in_place(sendbuf)).then(|| unsafe { bytes(sendbuf, n) });
            // SAFETY: as above.
            e.allreduce(input, unsafe { bytes_mut(recvbuf, n) }, count as usize, d, op, c)
        }))
    }

    fn MPI_Reduce_local / PMPI_Reduce_local(inbuf: *const c_void, inoutbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op) {
        let r = (|| {
            let op = handles::op(op)?;
            let (d, n) = buffer(inoutbuf, count, datatype)?;
            buffer(inbuf, count, datatype)?;
            if in_place(inbuf) {
                return Err(Error::new(ErrorClass::Buffer, Reason::BadArgument { what: "MPI_IN_PLACE is not allowed in MPI_Reduce_local" }));
            }
            crate::op::check(op, d)?;
            // SAFETY: `buffer` validated the descriptions of the user's buffers.
            crate::op::apply(op, d, unsafe { bytes_mut(inoutbuf, n) }, unsafe { bytes(inbuf, n) })
        })();
        code(r.map_err(|e| report("MPI_Reduce_local", None, e)))
    }
}
