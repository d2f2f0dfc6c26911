//! Requests: the state of one send or receive, from start to completion.

use crate::comm::CommId;
use crate::datatype::convertor::{Packer, Unpacker};
use crate::datatype::Datatype;
use crate::list::Link;
use crate::pool::Key;
use crate::rte::ProcId;
use crate::wire::Envelope;

/// `MPI_PROC_NULL`.
pub const PROC_NULL: i32 = -1;
const _: () = assert!(crate::topo::table::PROC_NULL == PROC_NULL);

/// `MPI_ANY_SOURCE`.
pub const ANY_SOURCE: i32 = -2;
/// `MPI_ANY_TAG`.
pub const ANY_TAG: i32 = -1;
/// Largest user tag (`MPI_TAG_UB`). Negative tags are the library's own (collectives).
pub const TAG_UB: i32 = i32::MAX;

/// A request handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReqId(pub Key);

/// A destination the caller has checked: a rank of a live communicator, with what a message to
/// it carries (read in the one look at the communicator the check took).
#[derive(Clone, Copy, Debug)]
pub struct Dest {
    /// The communicator.
    pub comm: CommId,
    /// The destination's rank in it.
    pub rank: u32,
    /// Its process.
    pub proc: ProcId,
    /// The communicator's context id.
    pub ctx: u16,
    /// This process's rank in the communicator (the sender's in the envelope).
    pub me: u32,
}

/// What a receive accepts, checked by the caller: senders and tags on a live communicator.
#[derive(Clone, Copy, Debug)]
pub struct RecvSel {
    /// The communicator.
    pub comm: CommId,
    /// Its context id.
    pub ctx: u16,
    /// Accepted senders.
    pub src: Source,
    /// Accepted tags.
    pub tag: TagSel,
}

/// Which senders a receive accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Only this communicator rank.
    Rank(u32),
    /// Any rank (`MPI_ANY_SOURCE`).
    Any,
}

/// Which tags a receive accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TagSel {
    /// Only this tag.
    Tag(i32),
    /// Any user tag (`MPI_ANY_TAG`); never the library's negative tags.
    Any,
}

impl Source {
    /// Whether a message from communicator rank `src` is accepted.
    #[inline]
    pub fn accepts(self, src: i32) -> bool {
        match self {
            Source::Rank(r) => r as i32 == src,
            Source::Any => true,
        }
    }
}

impl TagSel {
    /// Whether a message with `tag` is accepted.
    #[inline]
    pub fn accepts(self, tag: i32) -> bool {
        match self {
            TagSel::Tag(t) => t == tag,
            TagSel::Any => tag >= 0,
        }
    }
}

/// Send modes of the standard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendMode {
    /// `MPI_Send`: eager when small, rendezvous when large.
    Standard,
    /// `MPI_Ssend`: completes only once the receive has matched.
    Synchronous,
    /// `MPI_Rsend`: the receive is known to be posted; sent as standard.
    Ready,
}

/// What a completed operation reports (`MPI_Status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    /// Sender's rank in the communicator, or [`PROC_NULL`].
    pub source: i32,
    /// Message tag, or [`ANY_TAG`] for a receive from `MPI_PROC_NULL`.
    pub tag: i32,
    /// Bytes received (what `MPI_Get_count` divides by the type size).
    pub bytes: u64,
    /// Bytes of the message as sent (more than `bytes` when it was truncated).
    pub message_bytes: u64,
    /// Error of this operation (truncation, conversion, a failed transport), if any.
    pub error: Option<crate::error::Error>,
    /// Whether the operation was cancelled.
    pub cancelled: bool,
}

impl Status {
    /// The status of an operation with `MPI_PROC_NULL`.
    pub const PROC_NULL: Status = Status {
        source: PROC_NULL,
        tag: ANY_TAG,
        bytes: 0,
        message_bytes: 0,
        error: None,
        cancelled: false,
    };

    pub(crate) const EMPTY: Status = Status {
        source: ANY_SOURCE,
        tag: ANY_TAG,
        bytes: 0,
        message_bytes: 0,
        error: None,
        cancelled: false,
    };
}

/// Progress of a send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendState {
    /// Not on the wire yet: waiting for room in the BTL (or behind earlier sends to that peer).
    Queued,
    /// Rendezvous (or synchronous) header sent; waiting for the receiver's ACK.
    AwaitAck,
    /// The message is registered ([`SendReq::reg`]) and offered for reading (`RGET`); waiting
    /// for the receiver's FIN (or an ACK: it wants fragments after all).
    AwaitFin,
    /// ACK received; fragments from `offset` on still to send.
    Frags {
        /// Receiver's request id.
        dreq: u64,
        /// Next byte to send.
        offset: usize,
    },
    /// Everything handed to the BTLs.
    Done,
}

/// Progress of a receive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvState {
    /// In the posted queue.
    Posted,
    /// Matched a rendezvous; data arriving.
    Matched {
        /// The sending process.
        proc: ProcId,
        /// Total packed length.
        msg_len: u64,
        /// Bytes arrived so far.
        received: u64,
        /// Bytes a transport is writing straight into the buffer (`Sink::place`), not yet
        /// reported: the receive cannot complete before they are.
        placing: u64,
        /// Sender's request id, for the ACK.
        sreq: u64,
        /// Whether the ACK went out.
        acked: bool,
    },
    /// Matched an `RGET`: the receiver reads the message straight into its buffer.
    Reading {
        /// The sending process.
        proc: ProcId,
        /// Total packed length.
        msg_len: u64,
        /// Bytes the offer carried, already in the buffer: the read starts there.
        head: u64,
        /// Sender's request id, for the FIN.
        sreq: u64,
        /// The sender's registration.
        key: u64,
        /// Where the read is.
        step: ReadStep,
    },
    /// Finished.
    Done,
}

/// Progress of a receive's read of an `RGET` message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadStep {
    /// The get is not started yet (no room in the module).
    Start,
    /// The get is under way.
    Reading,
    /// The get is over (`failed` or not); the FIN is still to send.
    Fin {
        /// Whether the read failed.
        failed: bool,
    },
}

/// A send in flight.
pub struct SendReq {
    /// The message's bytes.
    pub conv: Packer,
    /// Destination process.
    pub proc: ProcId,
    /// Envelope (context, my rank, tag, sequence).
    pub env: Envelope,
    /// Mode.
    pub mode: SendMode,
    /// Where it is.
    pub state: SendState,
    /// Which routes carry the fragments after the ACK (planned at the first fragment).
    pub stripe: crate::bml::Stripe,
    /// Zero-copy fragments handed to a BTL and not yet reported complete.
    pub inflight: u32,
    /// The registration of an `RGET` offer still to withdraw: module index and key.
    pub reg: Option<(u8, u64)>,
}

/// A receive in flight.
pub struct RecvReq {
    /// Where the bytes go.
    pub conv: Unpacker,
    /// Communicator.
    pub comm: CommId,
    /// Accepted sources.
    pub src: Source,
    /// Accepted tags.
    pub tag: TagSel,
    /// Where it is.
    pub state: RecvState,
    /// Posting number within its communicator (earlier posts match first).
    pub post: u64,
}

impl RecvReq {
    /// Whether this receive accepts a message with `env`.
    #[inline]
    pub fn accepts(&self, env: &Envelope) -> bool {
        self.src.accepts(env.src) && self.tag.accepts(env.tag)
    }
}

/// What each start of a persistent point-to-point request begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum P2pStart {
    /// A send in this mode (`MPI_Send_init`, `MPI_Ssend_init`, `MPI_Rsend_init`).
    Send(SendMode),
    /// A buffered send: the message is copied into the attached buffer at each start
    /// (`MPI_Bsend_init`).
    Bsend,
    /// A receive (`MPI_Recv_init`).
    Recv,
}

/// The arguments of a persistent point-to-point request, kept for every start.
#[derive(Clone, Copy, Debug)]
pub struct P2pInit {
    /// What a start begins.
    pub start: P2pStart,
    /// The user's buffer, lent for the life of the request (MPI's rule for persistent
    /// requests).
    pub buf: *mut u8,
    /// Instances of `datatype` in it.
    pub count: u64,
    /// Their type, retained by whoever made the request until it is freed, so every start may
    /// use it even after the user freed it.
    pub datatype: Datatype,
    /// Destination or source rank (or `MPI_PROC_NULL`, `MPI_ANY_SOURCE`).
    pub peer: i32,
    /// Tag (or `MPI_ANY_TAG`).
    pub tag: i32,
    /// Communicator.
    pub comm: CommId,
    /// `count` as a number of elements when the type is predefined and dense (each start then
    /// takes the user's elements as they stand); worked out once, when the request is made.
    pub dense: Option<usize>,
}

// SAFETY: the buffer pointer is the user's loan for the life of the request, as a convertor's
// is (whichever thread starts it, under the engine's lock); nothing here dereferences it.
unsafe impl Send for P2pInit {}

/// A persistent collective request (`MPI_Bcast_init`, ...): its call is kept by the
/// collectives (which this layer does not know), under `call`.
#[derive(Clone, Copy, Debug)]
pub struct CollInit {
    /// Communicator.
    pub comm: CommId,
    /// The collectives' key for the call each start begins.
    pub call: crate::pool::Key,
}

/// What a persistent request begins at each start: point-to-point, a collective or a round of
/// partitioned communication; the request core's part (active or not, the current operation, completion, freeing) is the same for all.
#[derive(Clone, Copy, Debug)]
pub enum PersistentKind {
    /// A send or receive.
    P2p(P2pInit),
    /// A collective.
    Coll(CollInit),
    /// A partitioned send or receive.
    Part(PartInit),
}

/// A partitioned request (`MPI_Psend_init`, `MPI_Precv_init`): its channel is kept by
/// [`crate::part::Parts`] under `chan`.
#[derive(Clone, Copy, Debug)]
pub struct PartInit {
    /// Communicator.
    pub comm: CommId,
    /// The channel's key.
    pub chan: crate::pool::Key,
}

impl PersistentKind {
    /// The communicator the request is on.
    pub fn comm(&self) -> CommId {
        match self {
            PersistentKind::P2p(p) => p.comm,
            PersistentKind::Coll(c) => c.comm,
            PersistentKind::Part(p) => p.comm,
        }
    }
}

/// A persistent request (`MPI_Send_init`, `MPI_Recv_init`, ...): made once, started many times.
/// Each start begins an ordinary operation in a request slot of its own, which the PML runs and
/// completes like any other; the persistent request is *active* from the start until a Wait or
/// Test form has seen that operation complete.
#[derive(Clone, Copy, Debug)]
pub struct Persistent {
    /// What a start begins.
    pub kind: PersistentKind,
    /// The operation of the current start, while active.
    pub active: Option<ReqId>,
}

/// The operation of a request.
pub enum Op {
    /// A send.
    Send(SendReq),
    /// A receive.
    Recv(RecvReq),
    /// Nothing to do (an operation with `MPI_PROC_NULL`).
    Null,
    /// A persistent request: never complete itself, it names the operation of its current
    /// start (see [`crate::pml::requests::Current`]).
    Persistent(Persistent),
    /// Two operations completed as one (`MPI_Isendrecv`): see [`Joined`].
    Joined(Joined),
    /// A generalized request (`MPI_Grequest_start`): the user's operation, complete when the
    /// user says. The words are the MPI layer's (its callbacks and their state); the request
    /// core only keeps them.
    Generalized([usize; 4]),
}

/// Memory a joined request gives back when it completes: the platform's function, the address
/// and the length.
pub type Release = (fn(*mut u8, usize), *mut u8, usize);

/// A request completed when both of its parts have (`MPI_Isendrecv(_replace)`): the receive's
/// status, the first error of either. Its parts are ordinary requests that the protocols run;
/// [`crate::pml::requests::Requests::joined_progress`] takes each in as it completes.
#[derive(Clone, Copy, Debug)]
pub struct Joined {
    /// The receive, until it completes.
    pub recv: Option<ReqId>,
    /// The send, until it completes (`None` at once for one that went at once).
    pub send: Option<ReqId>,
    /// The receive's status, once in.
    pub status: Status,
    /// An error of the send.
    pub send_error: Option<crate::error::Error>,
    /// Memory to give back when both are done (a replace's packed copy): the platform's
    /// function, the address and the length.
    pub release: Option<Release>,
}

// SAFETY: the memory named is the C layer's temporary copy, owned by this request alone and
// handed back once, under the engine's lock.
unsafe impl Send for Joined {}

/// A request slot.
///
/// In declaration order (`repr(C)`), the operation last: a receive is smaller than a send, and
/// with the status after the operation the compiler wrote a new receive's status together with
/// the unused end of the operation, copied from the stack (~30 instructions a posting).
#[repr(C)]
pub struct Request {
    /// Its status once complete.
    pub status: Status,
    /// Link on one of the PML's work lists.
    pub work: Link,
    /// Link on a communicator's posted-receive queue.
    pub queue: Link,
    /// The Rust API scope that started it (0 for none).
    pub scope: u32,
    /// Whether it completed.
    pub complete: bool,
    /// Released by its owner before completion: free the slot when it completes.
    pub detached: bool,
    /// The operation.
    pub op: Op,
}

impl Request {
    pub(crate) fn new(op: Op, scope: u32) -> Request {
        Request {
            op,
            complete: false,
            status: Status::EMPTY,
            detached: false,
            scope,
            work: Link::default(),
            queue: Link::default(),
        }
    }

    pub(crate) fn recv(&self) -> Option<&RecvReq> {
        match &self.op {
            Op::Recv(r) => Some(r),
            _ => None,
        }
    }

    pub(crate) fn recv_mut(&mut self) -> Option<&mut RecvReq> {
        match &mut self.op {
            Op::Recv(r) => Some(r),
            _ => None,
        }
    }
}

pub(crate) fn work_link(r: &Request) -> &Link {
    &r.work
}

pub(crate) fn queue_link(r: &Request) -> &Link {
    &r.queue
}

impl Status {
    /// Sender's rank (`MPI_SOURCE`).
    pub fn source_rank(&self) -> i32 {
        self.source
    }

    /// Message tag (`MPI_TAG`).
    pub fn tag(&self) -> i32 {
        self.tag
    }

    /// Elements of `datatype` received (`MPI_Get_count`); `None` if the bytes are not a whole
    /// number of elements (`MPI_UNDEFINED`).
    pub fn count(&self, datatype: crate::datatype::Datatype) -> Option<u64> {
        let size = datatype.size() as u64;
        if size == 0 {
            return Some(0);
        }
        self.bytes.is_multiple_of(size).then_some(self.bytes / size)
    }
}

impl Status {
    /// Fills in the byte count, truncation and conversion errors of a finished receive of
    /// `msg_len` stream bytes into `conv`.
    pub(crate) fn finish(&mut self, msg_len: u64, conv: &Unpacker) {
        self.bytes = conv.local_len();
        self.message_bytes = msg_len;
        if msg_len > conv.capacity() as u64 {
            self.error = Some(crate::error::Error::new(
                crate::error::ErrorClass::Truncate,
                crate::error::Reason::Truncated {
                    message_bytes: msg_len,
                    buffer_bytes: conv.capacity() as u64,
                },
            ));
        } else if let Some(e) = conv.error() {
            self.error = Some(e.to_error());
        }
    }
}
