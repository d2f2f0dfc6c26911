//! Communicators and the processes in them.

use super::request::{Request, Scope};
use super::{checked, Equivalence, Error, Rank, Result, Status, Tag, Universe};
use crate::coll::{Buf, Call, Mode};
use crate::comm::CommId;
use crate::datatype::convertor::{Packer, Unpacker};
use crate::op::Op;
use crate::pml::request::{SendMode, ANY_SOURCE, ANY_TAG};
use crate::pml::MsgId;
use zerocopy::IntoBytes;

/// A communicator. Duplicates are freed when dropped.
pub struct Communicator<'u> {
    universe: &'u Universe,
    id: CommId,
    owned: bool,
    rank: Rank,
    size: Rank,
}

impl<'u> Communicator<'u> {
    /// `MPI_COMM_WORLD` or `MPI_COMM_SELF`; after finalize (when they are gone), a handle of
    /// no processes whose operations report the engine's error.
    pub(crate) fn predefined(universe: &'u Universe, id: CommId) -> Communicator<'u> {
        Communicator::wrap(universe, id, false).unwrap_or(Communicator {
            universe,
            id,
            owned: false,
            rank: crate::comm::create::UNDEFINED,
            size: 0,
        })
    }

    fn wrap(universe: &'u Universe, id: CommId, owned: bool) -> Result<Communicator<'u>> {
        let (rank, size) = universe.with(|e| {
            let c = e.comm(id)?;
            Ok((c.rank as Rank, c.size() as Rank))
        })?;
        Ok(Communicator {
            universe,
            id,
            owned,
            rank,
            size,
        })
    }

    /// My rank.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// Number of processes.
    pub fn size(&self) -> Rank {
        self.size
    }

    /// The engine's handle.
    pub fn id(&self) -> CommId {
        self.id
    }

    /// The process with rank `rank`, to send to or receive from.
    pub fn process_at_rank(&self, rank: Rank) -> Process<'_, 'u> {
        Process { comm: self, rank }
    }

    /// Any process, to receive from (`MPI_ANY_SOURCE`).
    pub fn any_process(&self) -> AnyProcess<'_, 'u> {
        AnyProcess { comm: self }
    }

    /// Blocks until every process has called it (`MPI_Barrier`).
    pub fn barrier(&self) -> Result<()> {
        let id = self.id;
        self.universe.inside(|cx| crate::coll::barrier(cx, id))
    }

    /// Combines every process's `send` with `op` into every process's `recv` (`MPI_Allreduce`).
    pub fn all_reduce_into<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: Op,
    ) -> Result<()> {
        check_lengths(send.len(), recv.len())?;
        let id = self.id;
        self.universe.inside(|cx| {
            crate::coll::allreduce(
                cx,
                Some(send.as_bytes()),
                recv.as_mut_bytes(),
                send.len(),
                T::DATATYPE,
                op,
                id,
            )
        })
    }

    /// Gathers every process's `send` into every process's `recv`, in rank order
    /// (`MPI_Allgather`); `recv` holds `size` times `send`'s elements.
    pub fn all_gather_into<T: Equivalence>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        check_blocks(
            send.len(),
            recv.len(),
            self.size,
            "all_gather_into: recv must hold size times send's elements",
        )?;
        let call = Call::Allgather {
            send: Some(buf(send)),
            recv: Buf {
                count: send.len() as u64,
                ..buf_mut(recv)
            },
        };
        // SAFETY: both slices hold what the call's counts say and are borrowed for the call.
        unsafe { self.blocking(call) }
    }

    /// Sends block `i` of `send` to process `i` and receives process `i`'s block for this
    /// process into block `i` of `recv` (`MPI_Alltoall`); both hold `size` equal blocks.
    pub fn all_to_all_into<T: Equivalence>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        let block = send.len() / (self.size.max(1) as usize);
        let what = "all_to_all_into: send and recv must hold size equal blocks";
        check_blocks(block, send.len(), self.size, what)?;
        check_blocks(block, recv.len(), self.size, what)?;
        let call = Call::Alltoall {
            send: Some(Buf {
                count: block as u64,
                ..buf(send)
            }),
            recv: Buf {
                count: block as u64,
                ..buf_mut(recv)
            },
        };
        // SAFETY: both slices hold `size` blocks and are borrowed for the call.
        unsafe { self.blocking(call) }
    }

    /// Combines `send` of processes `0..=rank` with `op` into `recv` (`MPI_Scan`).
    pub fn scan_into<T: Equivalence>(&self, send: &[T], recv: &mut [T], op: Op) -> Result<()> {
        self.scan(send, recv, op, false)
    }

    /// Combines `send` of processes `0..rank` with `op` into `recv` (`MPI_Exscan`); at rank 0
    /// `recv` is left as it was.
    pub fn exclusive_scan_into<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: Op,
    ) -> Result<()> {
        self.scan(send, recv, op, true)
    }

    /// `MPI_Scan`, or `MPI_Exscan` when `exclusive`.
    fn scan<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: Op,
        exclusive: bool,
    ) -> Result<()> {
        check_lengths(send.len(), recv.len())?;
        let (send, recv, count, dt) = (
            Some(send.as_ptr().cast()),
            recv.as_mut_ptr().cast(),
            send.len() as u64,
            T::DATATYPE,
        );
        let call = if exclusive {
            Call::Exscan {
                send,
                recv,
                count,
                dt,
                op,
            }
        } else {
            Call::Scan {
                send,
                recv,
                count,
                dt,
                op,
            }
        };
        // SAFETY: both slices hold `count` elements and are borrowed for the call.
        unsafe { self.blocking(call) }
    }

    /// Combines every process's `send` with `op` and leaves block `rank` of the result in
    /// `recv` (`MPI_Reduce_scatter_block`); `send` holds `size` blocks of `recv`'s length.
    pub fn reduce_scatter_block_into<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: Op,
    ) -> Result<()> {
        check_blocks(
            recv.len(),
            send.len(),
            self.size,
            "reduce_scatter_block_into: send must hold size times recv's elements",
        )?;
        let call = Call::ReduceScatterBlock {
            send: Some(send.as_ptr().cast()),
            recv: recv.as_mut_ptr().cast(),
            count: recv.len() as u64,
            dt: T::DATATYPE,
            op,
        };
        // SAFETY: `send` holds `size` blocks of `recv.len()` elements; both are borrowed for
        // the call.
        unsafe { self.blocking(call) }
    }

    /// Starts a barrier (`MPI_Ibarrier`).
    pub fn immediate_barrier<'s>(&self, scope: &'s Scope<'s, '_>) -> Result<Request<'s>> {
        // SAFETY: a barrier has no buffers.
        unsafe { self.immediate_collective(scope, Call::Barrier) }
    }

    /// Starts combining every process's `send` with `op` into every process's `recv`
    /// (`MPI_Iallreduce`).
    pub fn immediate_all_reduce_into<'s, T: Equivalence>(
        &self,
        scope: &'s Scope<'s, '_>,
        send: &'s [T],
        recv: &'s mut [T],
        op: Op,
    ) -> Result<Request<'s>> {
        check_lengths(send.len(), recv.len())?;
        let call = Call::Allreduce {
            send: Some(send.as_ptr().cast()),
            recv: recv.as_mut_ptr().cast(),
            count: send.len() as u64,
            dt: T::DATATYPE,
            op,
        };
        // SAFETY: both slices are borrowed for the scope, which waits for the request.
        unsafe { self.immediate_collective(scope, call) }
    }

    /// Runs `call` here to its local end.
    ///
    /// # Safety
    /// The buffers `call` names hold what its counts and types describe, for the call.
    unsafe fn blocking(&self, call: Call) -> Result<()> {
        let id = self.id;
        // SAFETY: the caller's contract.
        self.universe
            .inside(|cx| unsafe { crate::coll::collective(cx, id, call, Mode::Blocking) })
            .map(|_| ())
    }

    /// Starts `call` with a request of `scope`.
    ///
    /// # Safety
    /// The buffers `call` names hold what its counts and types describe, and live as long as
    /// the scope.
    unsafe fn immediate_collective<'s>(
        &self,
        scope: &'s Scope<'s, '_>,
        call: Call,
    ) -> Result<Request<'s>> {
        let (id, sid) = (self.id, scope.id);
        let req = scope.universe.inside(|cx| {
            // SAFETY: the caller's contract.
            let req =
                unsafe { crate::coll::collective(cx, id, call, Mode::NonBlocking { scope: sid }) }?;
            match req {
                Some(r) => Ok(r),
                None => cx.e().completed_request(Status::EMPTY),
            }
        })?;
        Ok(Request::new(scope.universe, req, None))
    }

    /// A duplicate with its own message context (`MPI_Comm_dup`, collective).
    pub fn duplicate(&self) -> Result<Communicator<'u>> {
        let id = self.id;
        let new = self
            .universe
            .inside(|cx| crate::comm::create::dup(cx, id))?;
        Communicator::wrap(self.universe, new, true)
    }

    /// Splits into one communicator per color, ranked by `key` then by rank here
    /// (`MPI_Comm_split`, collective); a process passing `None` gets none.
    pub fn split_by_color_with_key(
        &self,
        color: Option<i32>,
        key: i32,
    ) -> Result<Option<Communicator<'u>>> {
        let id = self.id;
        let color = color.unwrap_or(crate::comm::create::UNDEFINED);
        let new = self
            .universe
            .inside(|cx| crate::comm::create::split(cx, id, color, key))?;
        new.map(|c| Communicator::wrap(self.universe, c, true))
            .transpose()
    }

    /// Splits into one communicator per color, keeping the order of ranks.
    pub fn split_by_color(&self, color: Option<i32>) -> Result<Option<Communicator<'u>>> {
        self.split_by_color_with_key(color, self.rank)
    }

    /// The processes sharing this node's memory (`MPI_Comm_split_type` with
    /// `MPI_COMM_TYPE_SHARED`), ranked by `key`.
    pub fn split_shared(&self, key: i32) -> Result<Communicator<'u>> {
        let id = self.id;
        let shared = Some(crate::comm::create::SplitType::Shared);
        let new = self
            .universe
            .inside(|cx| crate::comm::create::split_type(cx, id, shared, key))?;
        let Some(new) = new else {
            return Err(Error::internal(
                "MPI_COMM_TYPE_SHARED left out a process, which shares its own node",
            ));
        };
        Communicator::wrap(self.universe, new, true)
    }

    /// A Cartesian grid over the first processes (`MPI_Cart_create`, without reordering);
    /// processes beyond the grid get `None`.
    pub fn create_cartesian(
        &self,
        dims: &[i32],
        periodic: &[bool],
    ) -> Result<Option<Communicator<'u>>> {
        let mut periods = [0i32; crate::topo::MAX_DIMS];
        for (p, &b) in periods.iter_mut().zip(periodic) {
            *p = b as i32;
        }
        let id = self.id;
        let n = dims.len().min(crate::topo::MAX_DIMS);
        let new = self
            .universe
            .inside(|cx| crate::topo::cart_create(cx, id, dims, &periods[..n]))?;
        new.map(|c| Communicator::wrap(self.universe, c, true))
            .transpose()
    }

    /// The grid coordinates of `rank` (`MPI_Cart_coords`).
    pub fn cartesian_coordinates(
        &self,
        rank: Rank,
    ) -> Result<heapless::Vec<i32, { crate::topo::MAX_DIMS }>> {
        let id = self.id;
        self.universe.with(|e| {
            let cart = crate::topo::cart(&e.p2p, id)?;
            let mut out = heapless::Vec::new();
            let _ = out.resize(cart.dims.len(), 0);
            cart.coords(rank as u32, &mut out);
            Ok(out)
        })
    }

    /// The ranks `disp` steps below and above this process along dimension `dim`
    /// (`MPI_Cart_shift`): `None` off a non-periodic edge.
    pub fn cartesian_shift(&self, dim: usize, disp: i32) -> Result<(Option<Rank>, Option<Rank>)> {
        let (id, rank) = (self.id, self.rank as u32);
        self.universe.with(|e| {
            let cart = crate::topo::cart(&e.p2p, id)?;
            if dim >= cart.dims.len() {
                return Err(crate::error::Error::bad_arg("no such dimension"));
            }
            let (lo, hi) = cart.shift(rank, dim, disp);
            let some = |r: i32| (r >= 0).then_some(r);
            Ok((some(lo), some(hi)))
        })
    }

    fn receive<T: Equivalence>(&self, src: Rank, tag: Tag, buf: &mut [T]) -> Result<Status> {
        let cap = size_of_val(buf);
        // SAFETY: `buf` stays mutably borrowed until `block` has waited for the request.
        let conv = unsafe { Unpacker::elements(buf.as_mut_ptr().cast(), buf.len(), T::DATATYPE) };
        let id = self.id;
        let req = self.universe.with(|e| e.irecv(conv, src, tag, id, 0))?;
        checked(self.universe.block(|e| e.test(req))?, cap)
    }

    fn immediate_receive<'s, T: Equivalence>(
        &self,
        scope: &'s Scope<'s, '_>,
        src: Rank,
        tag: Tag,
        buf: &'s mut [T],
    ) -> Result<Request<'s>> {
        let cap = size_of_val(buf);
        // SAFETY: `buf` is borrowed for the scope `'s`, which does not end before the request
        // completes (the scope waits for it).
        let conv = unsafe { Unpacker::elements(buf.as_mut_ptr().cast(), buf.len(), T::DATATYPE) };
        let (id, sid) = (self.id, scope.id);
        let req = scope.universe.with(|e| e.irecv(conv, src, tag, id, sid))?;
        Ok(Request::new(scope.universe, req, Some(cap)))
    }

    fn probe(&self, src: Rank, tag: Tag) -> Result<Status> {
        let id = self.id;
        self.universe.block(|e| e.iprobe(src, tag, id))
    }

    fn immediate_probe(&self, src: Rank, tag: Tag) -> Result<Option<Status>> {
        let id = self.id;
        self.universe.with(|e| e.iprobe(src, tag, id))
    }

    fn matched_probe(&self, src: Rank, tag: Tag) -> Result<(Message<'_, 'u>, Status)> {
        let id = self.id;
        let (msg, status) = self.universe.block(|e| e.improbe(src, tag, id))?;
        Ok((Message { comm: self, msg }, status))
    }
}

impl Drop for Communicator<'_> {
    fn drop(&mut self) {
        if self.owned {
            let id = self.id;
            let _ = self.universe.inside(|cx| crate::comm::create::free(cx, id));
        }
    }
}

/// A process of a communicator, as destination or source.
pub struct Process<'c, 'u> {
    comm: &'c Communicator<'u>,
    rank: Rank,
}

impl<'c, 'u> Process<'c, 'u> {
    /// Its rank.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    fn send_mode<T: Equivalence>(&self, buf: &[T], tag: Tag, mode: SendMode) -> Result<()> {
        let (rank, id) = (self.rank, self.comm.id);
        self.comm
            .universe
            // SAFETY: `buf` stays borrowed until the send has completed.
            .inside(|cx| {
                cx.send(
                    unsafe { Packer::elements(buf.as_ptr().cast(), buf.len(), T::DATATYPE) },
                    rank,
                    tag,
                    id,
                    mode,
                )
            })
    }

    /// Sends `buf` with tag 0 (`MPI_Send`).
    pub fn send<T: Equivalence>(&self, buf: &[T]) -> Result<()> {
        self.send_mode(buf, 0, SendMode::Standard)
    }

    /// Sends `buf` with `tag` (`MPI_Send`).
    pub fn send_with_tag<T: Equivalence>(&self, buf: &[T], tag: Tag) -> Result<()> {
        self.send_mode(buf, tag, SendMode::Standard)
    }

    /// Sends `buf` and returns once the receive has matched (`MPI_Ssend`).
    pub fn synchronous_send<T: Equivalence>(&self, buf: &[T]) -> Result<()> {
        self.send_mode(buf, 0, SendMode::Synchronous)
    }

    /// Synchronous send with `tag`.
    pub fn synchronous_send_with_tag<T: Equivalence>(&self, buf: &[T], tag: Tag) -> Result<()> {
        self.send_mode(buf, tag, SendMode::Synchronous)
    }

    fn immediate<'s, T: Equivalence>(
        &self,
        scope: &'s Scope<'s, '_>,
        buf: &'s [T],
        tag: Tag,
        mode: SendMode,
    ) -> Result<Request<'s>> {
        // SAFETY: `buf` is borrowed for the scope `'s`, which does not end before the request
        // completes (the scope waits for it).
        let conv = unsafe { Packer::elements(buf.as_ptr().cast(), buf.len(), T::DATATYPE) };
        let (rank, id, sid) = (self.rank, self.comm.id, scope.id);
        let req = scope
            .universe
            .with(|e| e.isend(conv, rank, tag, id, mode, sid))?;
        Ok(Request::new(scope.universe, req, None))
    }

    /// Starts sending `buf` with tag 0 (`MPI_Isend`).
    pub fn immediate_send<'s, T: Equivalence>(
        &self,
        scope: &'s Scope<'s, '_>,
        buf: &'s [T],
    ) -> Result<Request<'s>> {
        self.immediate(scope, buf, 0, SendMode::Standard)
    }

    /// Starts sending `buf` with `tag` (`MPI_Isend`).
    pub fn immediate_send_with_tag<'s, T: Equivalence>(
        &self,
        scope: &'s Scope<'s, '_>,
        buf: &'s [T],
        tag: Tag,
    ) -> Result<Request<'s>> {
        self.immediate(scope, buf, tag, SendMode::Standard)
    }

    /// Starts a synchronous send (`MPI_Issend`).
    pub fn immediate_synchronous_send<'s, T: Equivalence>(
        &self,
        scope: &'s Scope<'s, '_>,
        buf: &'s [T],
        tag: Tag,
    ) -> Result<Request<'s>> {
        self.immediate(scope, buf, tag, SendMode::Synchronous)
    }

    /// Broadcasts `buf` from this process to every process (`MPI_Bcast`); called by all.
    pub fn broadcast_into<T: Equivalence>(&self, buf: &mut [T]) -> Result<()> {
        let (rank, id) = (self.rank, self.comm.id);
        self.comm
            .universe
            // SAFETY: `buf` holds `buf.len()` elements of `T` and is borrowed for the call.
            .inside(|cx| unsafe {
                crate::coll::bcast(
                    cx,
                    buf.as_mut_ptr().cast(),
                    buf.len() as u64,
                    T::DATATYPE,
                    rank,
                    id,
                )
            })
    }

    /// At this process (the root): combines every process's `send` with `op` into `recv`
    /// (`MPI_Reduce`).
    pub fn reduce_into_root<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: Op,
    ) -> Result<()> {
        check_lengths(send.len(), recv.len())?;
        let (rank, id) = (self.rank, self.comm.id);
        let n = send.len();
        self.comm.universe.inside(|cx| {
            crate::coll::reduce(
                cx,
                Some(send.as_bytes()),
                Some(recv.as_mut_bytes()),
                n,
                T::DATATYPE,
                op,
                rank,
                id,
            )
        })
    }

    /// At any other process: contributes `send` to a reduction towards this process.
    pub fn reduce_into<T: Equivalence>(&self, send: &[T], op: Op) -> Result<()> {
        let (rank, id) = (self.rank, self.comm.id);
        let n = send.len();
        self.comm.universe.inside(|cx| {
            crate::coll::reduce(
                cx,
                Some(send.as_bytes()),
                None,
                n,
                T::DATATYPE,
                op,
                rank,
                id,
            )
        })
    }

    /// At this process (the root): gathers every process's `send` into `recv`, in rank order
    /// (`MPI_Gather`); `recv` holds `size` times `send`'s elements.
    pub fn gather_into_root<T: Equivalence>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        check_blocks(
            send.len(),
            recv.len(),
            self.comm.size,
            "gather_into_root: recv must hold size times send's elements",
        )?;
        let call = Call::Gather {
            send: Some(buf(send)),
            recv: Buf {
                count: send.len() as u64,
                ..buf_mut(recv)
            },
            root: self.rank,
        };
        // SAFETY: both slices hold what the call's counts say and are borrowed for the call.
        unsafe { self.comm.blocking(call) }
    }

    /// At any other process: sends `send` to this process's gather.
    pub fn gather_into<T: Equivalence>(&self, send: &[T]) -> Result<()> {
        let call = Call::Gather {
            send: Some(buf(send)),
            recv: NO_BUF,
            root: self.rank,
        };
        // SAFETY: `send` is borrowed for the call; the receive buffer is the root's only.
        unsafe { self.comm.blocking(call) }
    }

    /// At this process (the root): sends block `i` of `send` to process `i`, its own block to
    /// `recv` (`MPI_Scatter`); `send` holds `size` blocks of `recv`'s length.
    pub fn scatter_into_root<T: Equivalence>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        check_blocks(
            recv.len(),
            send.len(),
            self.comm.size,
            "scatter_into_root: send must hold size times recv's elements",
        )?;
        let call = Call::Scatter {
            send: Buf {
                count: recv.len() as u64,
                ..buf(send)
            },
            recv: Some(buf_mut(recv)),
            root: self.rank,
        };
        // SAFETY: both slices hold what the call's counts say and are borrowed for the call.
        unsafe { self.comm.blocking(call) }
    }

    /// At any other process: receives this process's block of its scatter into `recv`.
    pub fn scatter_into<T: Equivalence>(&self, recv: &mut [T]) -> Result<()> {
        let call = Call::Scatter {
            send: NO_BUF,
            recv: Some(buf_mut(recv)),
            root: self.rank,
        };
        // SAFETY: `recv` is borrowed for the call; the send buffer is the root's only.
        unsafe { self.comm.blocking(call) }
    }

    /// Receives into `buf` with any tag (`MPI_Recv`).
    pub fn receive_into<T: Equivalence>(&self, buf: &mut [T]) -> Result<Status> {
        self.comm.receive(self.rank, ANY_TAG, buf)
    }

    /// Receives into `buf` with `tag`.
    pub fn receive_into_with_tag<T: Equivalence>(&self, buf: &mut [T], tag: Tag) -> Result<Status> {
        self.comm.receive(self.rank, tag, buf)
    }

    /// Starts a receive into `buf` with `tag` (`MPI_Irecv`; `ANY_TAG` is -1).
    pub fn immediate_receive_into<'s, T: Equivalence>(
        &self,
        scope: &'s Scope<'s, '_>,
        buf: &'s mut [T],
        tag: Tag,
    ) -> Result<Request<'s>> {
        self.comm.immediate_receive(scope, self.rank, tag, buf)
    }

    /// Waits for a message from this process with any tag (`MPI_Probe`).
    pub fn probe(&self) -> Result<Status> {
        self.comm.probe(self.rank, ANY_TAG)
    }

    /// Waits for a message from this process with `tag`.
    pub fn probe_with_tag(&self, tag: Tag) -> Result<Status> {
        self.comm.probe(self.rank, tag)
    }

    /// Checks for a message from this process (`MPI_Iprobe`).
    pub fn immediate_probe_with_tag(&self, tag: Tag) -> Result<Option<Status>> {
        self.comm.immediate_probe(self.rank, tag)
    }

    /// Waits for a message and takes it for [`Message::matched_receive_into`] (`MPI_Mprobe`).
    pub fn matched_probe_with_tag(&self, tag: Tag) -> Result<(Message<'c, 'u>, Status)> {
        self.comm.matched_probe(self.rank, tag)
    }
}

/// Any process of a communicator, as a source.
pub struct AnyProcess<'c, 'u> {
    comm: &'c Communicator<'u>,
}

impl<'c, 'u> AnyProcess<'c, 'u> {
    /// Receives into `buf` from any process with any tag.
    pub fn receive_into<T: Equivalence>(&self, buf: &mut [T]) -> Result<Status> {
        self.comm.receive(ANY_SOURCE, ANY_TAG, buf)
    }

    /// Receives into `buf` from any process with `tag`.
    pub fn receive_into_with_tag<T: Equivalence>(&self, buf: &mut [T], tag: Tag) -> Result<Status> {
        self.comm.receive(ANY_SOURCE, tag, buf)
    }

    /// Starts a receive from any process with `tag`.
    pub fn immediate_receive_into<'s, T: Equivalence>(
        &self,
        scope: &'s Scope<'s, '_>,
        buf: &'s mut [T],
        tag: Tag,
    ) -> Result<Request<'s>> {
        self.comm.immediate_receive(scope, ANY_SOURCE, tag, buf)
    }

    /// Waits for a message from any process with any tag.
    pub fn probe(&self) -> Result<Status> {
        self.comm.probe(ANY_SOURCE, ANY_TAG)
    }

    /// Checks for a message from any process with `tag`.
    pub fn immediate_probe_with_tag(&self, tag: Tag) -> Result<Option<Status>> {
        self.comm.immediate_probe(ANY_SOURCE, tag)
    }

    /// Waits for a message and takes it for [`Message::matched_receive_into`].
    pub fn matched_probe(&self) -> Result<(Message<'c, 'u>, Status)> {
        self.comm.matched_probe(ANY_SOURCE, ANY_TAG)
    }
}

/// A message taken off the queue by a matched probe; only [`Message::matched_receive_into`] can
/// receive it.
#[must_use = "a matched message must be received"]
pub struct Message<'c, 'u> {
    comm: &'c Communicator<'u>,
    msg: Option<MsgId>,
}

impl Message<'_, '_> {
    /// Receives the message into `buf` (`MPI_Mrecv`).
    pub fn matched_receive_into<T: Equivalence>(self, buf: &mut [T]) -> Result<Status> {
        let cap = size_of_val(buf);
        // SAFETY: `buf` stays mutably borrowed until `block` has waited for the request.
        let conv = unsafe { Unpacker::elements(buf.as_mut_ptr().cast(), buf.len(), T::DATATYPE) };
        let msg = self.msg;
        let u = self.comm.universe;
        let req = u.with(|e| e.imrecv(conv, msg, 0))?;
        checked(u.block(|e| e.test(req))?, cap)
    }
}

/// A slice as a collective's buffer.
fn buf<T: Equivalence>(s: &[T]) -> Buf {
    Buf {
        // Only ever read through: the collective reads send buffers.
        ptr: s.as_ptr().cast_mut().cast(),
        count: s.len() as u64,
        dt: T::DATATYPE,
    }
}

/// A mutable slice as a collective's buffer.
fn buf_mut<T: Equivalence>(s: &mut [T]) -> Buf {
    Buf {
        ptr: s.as_mut_ptr().cast(),
        count: s.len() as u64,
        dt: T::DATATYPE,
    }
}

/// The buffer of an argument that is significant at the root only.
const NO_BUF: Buf = Buf {
    ptr: core::ptr::null_mut(),
    count: 0,
    dt: crate::datatype::Datatype::BYTE,
};

/// Checks that `whole` elements are `size` blocks of `block` elements; `what` says which
/// argument must be how long.
fn check_blocks(block: usize, whole: usize, size: Rank, what: &'static str) -> Result<()> {
    if (size as usize).checked_mul(block) != Some(whole) {
        return Err(crate::error::Error::new(
            crate::error::ErrorClass::Count,
            crate::error::Reason::BadArgument { what },
        ));
    }
    Ok(())
}

fn check_lengths(send: usize, recv: usize) -> Result<()> {
    if recv < send {
        return Err(crate::error::Error::new(
            crate::error::ErrorClass::Count,
            crate::error::Reason::BadArgument {
                what: "receive buffer shorter than the send buffer",
            },
        ));
    }
    Ok(())
}
