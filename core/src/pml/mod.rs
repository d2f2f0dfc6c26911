//! The Point-to-point Messaging Layer: MPI point-to-point semantics, over one of two paths
//! chosen once at init (parameter `pml`):
//!
//! - [`ob1`]: matching and the eager, rendezvous and RDMA-get protocols in this process, over
//!   the BTLs the BML chose per peer;
//! - [`cm`]: matching in the network, over a matching transport ([`crate::mtl::Mtl`]).
//!
//! Both keep their requests in the request core ([`requests`]): completion, test and release,
//! persistent requests, the Rust API's scopes, and the buffer of buffered sends ([`bsend`]).
//! [`request`] holds the types every path shares.

pub mod bsend;
pub mod cm;
pub mod ob1;
pub mod request;
pub mod requests;

pub use cm::Cm;
pub use ob1::{Incoming, Ob1};
pub use requests::Requests;

use crate::comm::{CommId, CommTable};
use crate::datatype::repr::Repr;
use crate::datatype::table::TypeTable;
use crate::error::Result;
use crate::params::{Default, Kind, ParamDef};
use crate::pool::Key;
use crate::rte::ProcId;
use request::ReqId;

/// Most slots a request or matched-probe message handle of the C ABI can name (its index field).
pub const HANDLE_SLOTS: u32 = 1 << 22;

/// `pml`.
pub static PML_SELECT: ParamDef = ParamDef {
    name: "pml",
    kind: Kind::Str,
    default: Default::Str(""),
    description: "Point-to-point layer: 'ob1' (matching in the engine, over the BTLs) or 'cm' (matching in the network, over an MTL); empty: the platform's choice (cm on lightweight-kernel nodes, ob1 elsewhere)",
};

/// Parameters of the PML.
pub static PARAMS: [&ParamDef; 5] = [
    &requests::MAX_REQUESTS,
    &ob1::UNEX_MSGS,
    &ob1::UNEX_CHUNK_SIZE,
    &ob1::UNEX_CHUNKS,
    &PML_SELECT,
];

/// A message taken off the unexpected queue by a matched probe, for `MPI_Mrecv`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsgId(pub Key);

/// Counters, for tests and tools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Eager messages sent.
    pub eager_sent: u64,
    /// Rendezvous started.
    pub rndv_sent: u64,
    /// Rendezvous offering the message for reading (`RGET`) started.
    pub rget_sent: u64,
    /// Messages this process read from their senders (gets finished without error).
    pub reads: u64,
    /// Rendezvous fragments sent.
    pub frags_sent: u64,
    /// ACKs sent.
    pub acks_sent: u64,
    /// Messages that arrived before their receive.
    pub unexpected: u64,
    /// Messages that arrived before an earlier one from the same sender.
    pub out_of_order: u64,
    /// Fragments refused for lack of storage (back-pressure).
    pub refused: u64,
    /// Fragments rejected as corrupt or hostile.
    pub rejected: u64,
    /// Times a send waited for room in a BTL.
    pub send_stalls: u64,
    /// Fragments handed to each BTL module (by module index; heads, fragments and control).
    pub btl_frags: [u64; crate::bml::MAX_BTLS],
    /// Bytes handed to each BTL module, headers included.
    pub btl_bytes: [u64; crate::bml::MAX_BTLS],
}

impl Stats {
    /// Counts a fragment of `bytes` handed to module `btl`.
    #[inline(always)]
    pub fn sent(&mut self, btl: u8, bytes: usize) {
        if let Some(f) = self.btl_frags.get_mut(btl as usize) {
            *f += 1;
            self.btl_bytes[btl as usize] += bytes as u64;
        }
    }
}

/// The point-to-point layer in use.
// One per process, built once at init: the size difference costs nothing, and a no_std core
// has no box to put the larger one in.
#[allow(clippy::large_enum_variant)]
pub enum Pml {
    /// Matching here, over the BTLs.
    Ob1(Ob1),
    /// Matching in the network, over an MTL.
    Cm(Cm),
}

impl Pml {
    /// The request core.
    #[inline(always)]
    pub fn requests(&self) -> &Requests {
        match self {
            Pml::Ob1(p) => &p.requests,
            Pml::Cm(p) => &p.requests,
        }
    }

    /// The request core, to start, complete and free requests.
    #[inline(always)]
    pub fn requests_mut(&mut self) -> &mut Requests {
        match self {
            Pml::Ob1(p) => &mut p.requests,
            Pml::Cm(p) => &mut p.requests,
        }
    }

    /// The counters.
    pub fn stats(&self) -> Stats {
        match self {
            Pml::Ob1(p) => p.stats,
            Pml::Cm(p) => p.stats,
        }
    }

    /// Communicator `comm`'s matching queues (receives posted, unexpected messages, their
    /// high-water mark), where they are here: `None` under cm, which matches in the network.
    pub fn queue_lengths(&self, comm: crate::comm::CommId) -> Option<(u32, u32, u32)> {
        match self {
            Pml::Ob1(p) => p.queue_lengths(comm),
            Pml::Cm(_) => None,
        }
    }

    /// Cancels request `id` if it is a receive not yet matched; otherwise it completes normally.
    pub fn cancel(&mut self, id: ReqId) -> Result<()> {
        match self {
            Pml::Ob1(p) => p.cancel(id),
            Pml::Cm(p) => p.cancel(id),
        }
    }

    /// The matched-probe message in slot `index`, if any.
    pub fn message_at(&self, index: u32) -> Option<MsgId> {
        match self {
            Pml::Ob1(p) => p.message_at(index),
            Pml::Cm(p) => p.message_at(index),
        }
    }

    /// Whether outgoing work (queued sends, fragments, unacknowledged puts) is still pending.
    pub fn has_pending_work(&self) -> bool {
        match self {
            Pml::Ob1(p) => p.has_pending_work(),
            Pml::Cm(p) => p.busy(),
        }
    }

    /// Makes room for the per-communicator state of `slots` communicators (the communicator
    /// table's room, so that a communicator made in any of its slots has its state).
    pub(crate) fn comm_room(&mut self, slots: u32) -> Result<()> {
        match self {
            Pml::Ob1(p) => p.comm_room(slots),
            Pml::Cm(p) => p.comm_room(slots),
        }
    }

    /// A new communicator in slot `comm` (ob1 takes in what arrived for it before it existed).
    /// Fails only when its state had no room and could not grow.
    pub(crate) fn comm_added(
        &mut self,
        comms: &CommTable,
        types: &TypeTable,
        comm: CommId,
    ) -> Result<()> {
        match self {
            Pml::Ob1(p) => p.comm_added(comms, types, comm),
            Pml::Cm(p) => p.comm_added(comms, comm),
        }
    }

    /// Whether communicator `comm` still has receives posted.
    pub(crate) fn comm_busy(&self, comm: CommId) -> bool {
        match self {
            Pml::Ob1(p) => p.comm_busy(comm),
            Pml::Cm(p) => p.comm_busy(comm),
        }
    }

    /// Drops what is still held for communicator `comm`, which is being freed.
    pub(crate) fn comm_removed(&mut self, comm: CommId) {
        if let Pml::Ob1(p) = self {
            p.comm_removed(comm);
        }
    }

    /// Records the form of process `proc`'s data (ob1 converts; cm jobs are homogeneous).
    pub fn set_repr(&mut self, proc: ProcId, repr: Repr) {
        if let Pml::Ob1(p) = self {
            p.set_repr(proc, repr);
        }
    }

    /// A peer a transport reported unreachable, if any.
    pub fn unreachable(&self) -> Option<ProcId> {
        match self {
            Pml::Ob1(p) => p.unreachable,
            Pml::Cm(_) => None,
        }
    }
}
