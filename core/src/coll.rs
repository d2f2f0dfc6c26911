//! Collective operations over point-to-point, with the library's own negative tags.
//!
//! Simple, correct algorithms: dissemination barrier, binomial-tree broadcast, and reductions
//! as a binomial-tree reduce (plus a broadcast for allreduce) run segment by segment through two
//! scratch buffers carved at init, so a reduction of any size needs no memory beyond them.
//! Algorithm choice by size and communicator shape comes with the collectives issue.

use crate::comm::CommId;
use crate::datatype::convertor::{Packer, Unpacker};
use crate::datatype::Datatype;
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::op::{self, Op};
use crate::params::{Default, Kind, ParamDef, Params};

/// `coll_segment_bytes`.
pub static SEGMENT_BYTES: ParamDef = ParamDef {
    name: "coll_segment_bytes",
    kind: Kind::Int {
        min: 4096,
        max: 1 << 28,
    },
    default: Default::Int(128 << 10),
    description: "Bytes per segment of a reduction (two scratch buffers of this size are reserved)",
};

/// Parameters of the collectives.
pub static PARAMS: [&ParamDef; 1] = [&SEGMENT_BYTES];

/// Bytes of each scratch buffer (a multiple of 64, so every element size divides segments well).
pub fn scratch_len(params: &Params) -> usize {
    params.usize(&SEGMENT_BYTES) & !63
}

const TAG_BARRIER: i32 = -10;
const TAG_BCAST: i32 = -12;
const TAG_REDUCE: i32 = -13;

/// What every segment of one reduction shares.
#[derive(Clone, Copy)]
struct Reduction {
    datatype: Datatype,
    op: Op,
    /// Rank the result goes to.
    root: u32,
    comm: CommId,
    rank: u32,
    size: u32,
}

fn root_error(root: i32, size: u32) -> Error {
    Error::new(
        ErrorClass::Root,
        Reason::RankOutOfRange { rank: root, size },
    )
}

impl Engine {
    fn rank_size(&self, comm: CommId) -> Result<(u32, u32)> {
        let c = self.check_comm(comm)?;
        Ok((c.rank, c.size()))
    }

    /// Blocks until every member of `comm` has called it (`MPI_Barrier`; dissemination).
    pub fn barrier(&mut self, comm: CommId) -> Result<()> {
        let (rank, size) = self.rank_size(comm)?;
        let mut k = 1;
        while k < size {
            let to = (rank + k) % size;
            let from = (rank + size - k) % size;
            let r = self.irecv_internal(Unpacker::empty(), from, TAG_BARRIER, comm)?;
            self.send_internal(Packer::from_slice(&[]), to, TAG_BARRIER, comm)?;
            self.wait(r)?;
            k *= 2;
        }
        Ok(())
    }

    /// Broadcasts `count` instances of `datatype` at `buf` from `root` to every member of `comm`
    /// (`MPI_Bcast`; binomial tree).
    ///
    /// # Safety
    /// Every byte the type map of `count` instances touches from `buf` must be readable and
    /// writable, and not otherwise accessed during the call.
    pub unsafe fn bcast(
        &mut self,
        buf: *mut u8,
        count: u64,
        datatype: Datatype,
        root: i32,
        comm: CommId,
    ) -> Result<()> {
        let (rank, size) = self.rank_size(comm)?;
        if root < 0 || root as u32 >= size {
            return Err(root_error(root, size));
        }
        self.types.check_committed(datatype)?;
        let b = Buf {
            at: buf,
            count,
            datatype,
        };
        // SAFETY: the caller's contract.
        unsafe { self.bcast_tag(b, root as u32, comm, TAG_BCAST, rank, size) }
    }

    /// # Safety
    /// As for [`Engine::bcast`], over `buf`.
    unsafe fn bcast_tag(
        &mut self,
        buf: Buf,
        root: u32,
        comm: CommId,
        tag: i32,
        rank: u32,
        size: u32,
    ) -> Result<()> {
        let vr = (rank + size - root) % size;
        let real = |v: u32| (v + root) % size;
        let mut mask = 1;
        while mask < size {
            if vr & mask != 0 {
                // SAFETY: the caller's contract; the receive completes before this returns.
                let conv = unsafe { Unpacker::new(buf.at, buf.count, buf.datatype, &self.types)? };
                self.recv_internal(conv, real(vr - mask), tag, comm)?;
                break;
            }
            mask <<= 1;
        }
        mask >>= 1;
        while mask > 0 {
            if vr + mask < size {
                // SAFETY: the caller's contract; the send completes before this returns.
                let conv = unsafe { Packer::new(buf.at, buf.count, buf.datatype, &self.types)? };
                self.send_internal(conv, real(vr + mask), tag, comm)?;
            }
            mask >>= 1;
        }
        Ok(())
    }

    /// Reduces every member's input with `op` into `output` at `root` (`MPI_Reduce`).
    ///
    /// At the root `output` is the receive buffer and `input` the send buffer, or `None` for
    /// `MPI_IN_PLACE` (the input is then in `output`). Elsewhere `input` is the send buffer and
    /// `output` is ignored. Buffers hold `count` elements of `datatype` (at its extent).
    #[allow(clippy::too_many_arguments)]
    pub fn reduce(
        &mut self,
        input: Option<&[u8]>,
        output: Option<&mut [u8]>,
        count: usize,
        datatype: Datatype,
        op: Op,
        root: i32,
        comm: CommId,
    ) -> Result<()> {
        let (rank, size) = self.rank_size(comm)?;
        if root < 0 || root as u32 >= size {
            return Err(root_error(root, size));
        }
        let bytes = count * datatype.extent();
        let root = root as u32;
        let (input, mut output) = if rank == root {
            let out = output.ok_or(Error::new(ErrorClass::Buffer, Reason::NullBuffer))?;
            (input, Some(&mut out[..bytes]))
        } else {
            let inp = input.ok_or(Error::bad_arg(
                "MPI_IN_PLACE is only valid at the root of a reduce",
            ))?;
            (Some(inp), None)
        };
        op::check(op, datatype)?;
        let r = Reduction {
            datatype,
            op,
            root,
            comm,
            rank,
            size,
        };
        self.segments(datatype, count, |e, range| {
            let inp = input.map(|i| &i[range.clone()]);
            let out = output.as_deref_mut().map(|o| &mut o[range]);
            e.reduce_segment(&r, inp, out)
        })
    }

    /// Reduces every member's input with `op` into every member's `output` (`MPI_Allreduce`).
    /// `input` is `None` for `MPI_IN_PLACE` (the input is then in `output`).
    pub fn allreduce(
        &mut self,
        input: Option<&[u8]>,
        output: &mut [u8],
        count: usize,
        datatype: Datatype,
        op: Op,
        comm: CommId,
    ) -> Result<()> {
        let (rank, size) = self.rank_size(comm)?;
        let bytes = count * datatype.extent();
        let output = &mut output[..bytes];
        op::check(op, datatype)?;
        let r = Reduction {
            datatype,
            op,
            root: 0,
            comm,
            rank,
            size,
        };
        self.segments(datatype, count, |e, range| {
            let out = &mut output[range.clone()];
            match (input, rank == 0) {
                (Some(inp), true) => e.reduce_segment(&r, Some(&inp[range]), Some(out))?,
                (Some(inp), false) => e.reduce_segment(&r, Some(&inp[range]), None)?,
                (None, true) => e.reduce_segment(&r, None, Some(out))?,
                (None, false) => e.reduce_segment(&r, Some(out), None)?,
            }
            let b = Buf {
                at: out.as_mut_ptr(),
                count: (out.len() / datatype.extent().max(1)) as u64,
                datatype,
            };
            // SAFETY: `out` holds the segment's elements and is borrowed for the call.
            unsafe { e.bcast_tag(b, 0, comm, TAG_BCAST, rank, size) }
        })
    }

    /// Runs `f` over consecutive byte ranges of `count` elements, each fitting a scratch buffer.
    fn segments(
        &mut self,
        datatype: Datatype,
        count: usize,
        mut f: impl FnMut(&mut Engine, core::ops::Range<usize>) -> Result<()>,
    ) -> Result<()> {
        let ext = datatype.extent().max(1);
        let scratch = self.scratch.as_ref().map_or(0, |(a, _)| a.len());
        let per = (scratch / ext).max(1);
        let mut first = 0;
        while first < count {
            let n = per.min(count - first);
            f(self, first * ext..(first + n) * ext)?;
            first += n;
        }
        Ok(())
    }

    /// One segment of a binomial-tree reduce towards the root.
    fn reduce_segment(
        &mut self,
        r: &Reduction,
        input: Option<&[u8]>,
        output: Option<&mut [u8]>,
    ) -> Result<()> {
        let (a, b) = self.scratch.take().ok_or(Error::new(
            ErrorClass::Intern,
            Reason::BadArgument {
                what: "reentrant reduction",
            },
        ))?;
        let result = self.reduce_with(r, input, output, &mut *a, &mut *b);
        self.scratch = Some((a, b));
        result
    }

    fn reduce_with(
        &mut self,
        r: &Reduction,
        input: Option<&[u8]>,
        output: Option<&mut [u8]>,
        a: &mut [u8],
        b: &mut [u8],
    ) -> Result<()> {
        let Reduction {
            datatype,
            op,
            root,
            comm,
            rank,
            size,
        } = *r;
        let vr = (rank + size - root) % size;
        let real = |v: u32| (v + root) % size;
        let acc: &mut [u8] = match output {
            Some(out) => {
                if let Some(inp) = input {
                    out.copy_from_slice(inp);
                }
                out
            }
            None => {
                let inp = input.expect("non-root has an input");
                a[..inp.len()].copy_from_slice(inp);
                &mut a[..inp.len()]
            }
        };
        let len = acc.len();
        let n = (len / datatype.extent().max(1)) as u64;
        let mut mask = 1;
        while mask < size {
            if vr & mask != 0 {
                // SAFETY: `acc` holds `n` elements and is borrowed until the send completes.
                let conv = unsafe { Packer::new(acc.as_ptr(), n, datatype, &self.types)? };
                return self.send_internal(conv, real(vr - mask), TAG_REDUCE, comm);
            }
            if vr + mask < size {
                let part = &mut b[..len];
                // SAFETY: `part` holds `n` elements and is borrowed until the receive completes.
                let conv = unsafe { Unpacker::new(part.as_mut_ptr(), n, datatype, &self.types)? };
                self.recv_internal(conv, real(vr + mask), TAG_REDUCE, comm)?;
                op::apply(op, datatype, acc, &b[..len])?;
            }
            mask <<= 1;
        }
        Ok(())
    }
}

/// A typed buffer of a collective.
#[derive(Clone, Copy)]
struct Buf {
    at: *mut u8,
    count: u64,
    datatype: Datatype,
}
