//! The Byte Transfer Layer: MPI-agnostic byte movers.
//!
//! A BTL module moves fragments to a peer and hands arriving fragments to a [`Sink`]; it knows
//! nothing of tags, communicators or matching. Each module advertises its limits (eager limit,
//! fragment size, latency, bandwidth, capabilities) in [`BtlAttrs`]; the BML decides which modules
//! serve which peer, and the PML runs its protocols over them.
//!
//! Sending is copy-in: the PML [`Btl::reserve`]s space for a fragment in the module's own memory
//! (a ring slot in shared memory, a registered send buffer, a socket's send queue), writes the
//! header and packs the payload straight into it, then [`Btl::commit`]s. A module that cannot take
//! the fragment now returns `None` from `reserve`: that is back-pressure, never an error; the PML
//! keeps the work pending and retries after progress. Zero-copy sends and RDMA get, which
//! complete later and are reported through [`Sink::completed`], are optional capabilities
//! ([`BtlFlags::SEND_REF`], [`BtlFlags::GET`]): a module with `GET` lets a peer read memory it
//! [`Btl::register`]ed for it, under a [`RemoteKey`] the upper layer sends along, with
//! [`Btl::get`].
//!
//! Receiving is by progress: [`Btl::progress`] delivers each arrived fragment to the sink, which
//! may answer [`Delivery::Retry`] when it has no room for it yet; the module then keeps that
//! fragment (and the ones behind it from the same peer) for a later progress call. A module that
//! learns a fragment's header before its payload (a byte stream) may first offer it to
//! [`Sink::place`]: the sink can name where the payload goes (the user's buffer), so the module
//! reads it straight there instead of through its own buffer and a copy.

pub mod loopback;

use core::sync::atomic::AtomicU32;

use crate::arch::Arch;
use crate::error::Result;
use crate::rte::ProcId;

/// A module's handle for a peer, chosen by the module in [`Btl::add_procs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoint(pub u32);

/// Active-message tag: which upper layer a fragment is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AmTag(pub u8);

impl AmTag {
    /// Point-to-point messaging (the PML).
    pub const PML: AmTag = AmTag(1);
}

/// Identifies a zero-copy send or RDMA operation in its completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token(pub u64);

/// User memory a zero-copy send reads from until the module reports the send complete.
#[derive(Clone, Copy, Debug)]
pub struct DataRef {
    ptr: *const u8,
    len: usize,
}

// SAFETY: a DataRef is a loan of user memory for the life of a request (see `DataRef::new`);
// whichever thread progresses the module may read it.
unsafe impl Send for DataRef {}

impl DataRef {
    /// A reference to `len` bytes at `ptr`.
    ///
    /// # Safety
    /// The bytes must stay valid for reads, and unchanged, until the send that carries them is
    /// reported complete (or returns [`Sent::Done`]). `ptr` may dangle when `len` is 0.
    pub unsafe fn new(ptr: *const u8, len: usize) -> DataRef {
        DataRef { ptr, len }
    }

    /// Start of the bytes.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Memory a [`Btl::get`] writes: the destination of a read.
#[derive(Clone, Copy, Debug)]
pub struct DestRef {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: a DestRef is a loan of user memory for the life of a request (see `DestRef::new`);
// whichever thread progresses the module may write it.
unsafe impl Send for DestRef {}

impl DestRef {
    /// A destination of `len` bytes at `ptr`.
    ///
    /// # Safety
    /// The bytes must stay valid for writes, and untouched by anyone else, until the get that
    /// fills them is reported complete. `ptr` may dangle when `len` is 0.
    pub unsafe fn new(ptr: *mut u8, len: usize) -> DestRef {
        DestRef { ptr, len }
    }

    /// Start of the bytes.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Names memory a module exposed to a peer for reading ([`Btl::register`]); meaningful only to
/// the same component at that peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteKey(pub u64);

/// What [`Btl::send_ref`] did with the data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// Already consumed: the memory may be reused now.
    Done,
    /// Still being read: [`Sink::completed`] will report the token.
    Pending,
}

/// Capability bits of a module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BtlFlags(u32);

impl BtlFlags {
    /// Can send fragments.
    pub const SEND: BtlFlags = BtlFlags(1);
    /// Can read memory a peer registered ([`Btl::register`], [`Btl::get`]).
    pub const GET: BtlFlags = BtlFlags(4);
    /// Can send a fragment's payload straight from user memory ([`Btl::send_ref`]).
    pub const SEND_REF: BtlFlags = BtlFlags(8);
    /// [`Btl::send_inline`] avoids copying data it can send at once.
    pub const SEND_INLINE: BtlFlags = BtlFlags(16);
    /// Has work only when it says so (the `self` module, whose fragments this process wrote
    /// itself): it raises its bit in the word [`Btl::set_wake`] gave it, and the BML polls it
    /// then, not in every round of every wait.
    pub const POLL_ON_WAKE: BtlFlags = BtlFlags(32);

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: BtlFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Union.
    pub const fn union(self, other: BtlFlags) -> BtlFlags {
        BtlFlags(self.0 | other.0)
    }

    /// These flags without `other`'s bits.
    pub const fn without(self, other: BtlFlags) -> BtlFlags {
        BtlFlags(self.0 & !other.0)
    }
}

/// A module's limits and performance, all run-time parameters of its component.
#[derive(Clone, Copy, Debug)]
pub struct BtlAttrs {
    /// Component name as users type it in `--mca btl`, e.g. `"self"`, `"sm"`, `"tcp"`.
    pub component: &'static str,
    /// Largest eager fragment, header included: messages whose header and payload fit go in one
    /// fragment with no handshake.
    pub eager_limit: usize,
    /// Largest fragment of any kind, header included.
    pub max_send_size: usize,
    /// Typical one-way latency of a small fragment, nanoseconds (orders the eager list).
    pub latency_ns: u32,
    /// Bandwidth in Mbit/s (weights the send list).
    pub bandwidth_mbps: u32,
    /// For a peer reachable by several components, only those of highest exclusivity are used
    /// (`self` over everything for the own process, `sm` over `tcp` on one node).
    pub exclusivity: u32,
    /// Capabilities.
    pub flags: BtlFlags,
    /// Messages of at least this many packed bytes are read by the receiver ([`Btl::get`])
    /// instead of sent in fragments, where the module has [`BtlFlags::GET`].
    pub get_min: usize,
}

/// What a module learns about a peer before connecting.
#[derive(Clone, Copy, Debug)]
pub struct PeerInfo {
    /// The peer.
    pub proc: ProcId,
    /// Its architecture descriptor, if it published a valid one.
    pub arch: Option<Arch>,
    /// Node the peer runs on.
    pub node: u32,
}

/// Read access to the modex for modules connecting to peers.
pub trait Modex {
    /// What `proc` published under `key`, written into `out`.
    fn get(&mut self, proc: ProcId, key: &str, out: &mut [u8]) -> Result<Option<usize>>;
}

/// Write access to the modex for modules publishing their addresses.
pub trait ModexPut {
    /// Publishes `value` under `key`.
    fn put(&mut self, key: &str, value: &[u8]) -> Result<()>;
}

/// Bytes of a fragment's start a module hands to [`Sink::place`] (all of a shorter fragment):
/// enough for any header of the upper layers.
pub const PLACE_HEAD: usize = 64;

/// Where a fragment's payload goes, as [`Sink::place`] names it.
#[derive(Clone, Copy, Debug)]
pub struct Placement {
    /// Bytes at the fragment's start that are the upper layer's header (at most the `head`
    /// handed to [`Sink::place`]); the module writes them nowhere.
    pub skip: usize,
    /// Where the fragment's bytes from `skip` on go: writable for the rest of the fragment's
    /// length until the module calls [`Sink::placed`].
    pub dest: *mut u8,
    /// Names the placement in [`Sink::placed`].
    pub token: Token,
}

// SAFETY: a Placement is a loan of user memory for the life of a request (see `Sink::place`);
// whichever thread progresses the module may write it.
unsafe impl Send for Placement {}

/// What a sink did with a delivered fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Taken (or rejected as corrupt); the module may reuse its memory.
    Consumed,
    /// Taken, and it completed an operation the process may be waiting for: a module may stop
    /// polling here and leave what follows for its next call, so that a message behind it meets
    /// the receive posted next instead of being stored as unexpected.
    Satisfied,
    /// No room now: keep it and deliver it again later, before anything behind it from that peer.
    Retry,
}

impl Delivery {
    /// Whether the fragment was taken.
    #[inline]
    pub fn consumed(self) -> bool {
        self != Delivery::Retry
    }
}

/// Receiver of a module's arrivals and completions: the engine.
pub trait Sink {
    /// A fragment from `from` arrived with active-message tag `tag`.
    fn deliver(&mut self, from: ProcId, tag: AmTag, frag: &[u8]) -> Delivery;

    /// A zero-copy send or a get finished.
    fn completed(&mut self, token: Token, result: Result<()>) {
        let _ = (token, result);
    }

    /// A fragment of `len` bytes from `from`, tagged `tag`, is arriving; `head` is its start
    /// (its first [`PLACE_HEAD`] bytes, or all of a shorter fragment). `Some` takes the fragment
    /// as it is: the module writes its bytes from `skip` on to `dest` and then calls
    /// [`Sink::placed`] — with an error if it cannot (the connection ended first) — and never
    /// delivers the fragment through [`Sink::deliver`]. `None` (the default): deliver it as
    /// usual. For modules that can read a payload into a given place ([`Btl::progress`]).
    fn place(&mut self, from: ProcId, tag: AmTag, head: &[u8], len: usize) -> Option<Placement> {
        let _ = (from, tag, head, len);
        None
    }

    /// The `len` payload bytes of the placement `token` from `from` are written (`Ok`), or will
    /// not all be (`Err`); either way the module no longer touches the placement's memory.
    fn placed(&mut self, from: ProcId, token: Token, len: usize, result: Result<()>) {
        let _ = (from, token, len, result);
    }

    /// The network between this process and `peer` failed under a connection (no
    /// acknowledgment within the module's timeout, host or network unreachable): what was under
    /// way to or from `peer` is lost and nothing more will arrive from it. Not for a peer that
    /// ended (the launcher reports that) nor for a stranger's connection.
    fn unreachable(&mut self, peer: ProcId) {
        let _ = peer;
    }
}

/// A process's area of node-shared memory for the collectives: `len` bytes at `base`, 64-byte
/// aligned, mapped in this process until the module is finalized (or dropped), written only by
/// the process it belongs to and read by the other processes of its node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Area {
    /// First byte.
    pub base: core::ptr::NonNull<u8>,
    /// Length in bytes.
    pub len: usize,
}

/// Whether a process's collective [`Area`] can be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AreaState {
    /// Mapped.
    Mapped(Area),
    /// Not mapped yet (the peer may still be setting up); ask again after progress.
    Pending,
    /// Never: the module has none for that process (or refused its memory).
    Absent,
}

/// A BTL module: one per usable device (a shared-memory segment, a network interface, a NIC).
pub trait Btl: Send {
    /// Limits and capabilities.
    fn attrs(&self) -> &BtlAttrs;

    /// Publishes this module's addresses in the modex (before the fence).
    fn publish(&mut self, modex: &mut dyn ModexPut) -> Result<()> {
        let _ = modex;
        Ok(())
    }

    /// Decides which of `peers` this module can reach (after the fence), writing an endpoint for
    /// each reachable one into the matching slot of `endpoints` (same length as `peers`).
    fn add_procs(
        &mut self,
        peers: &[PeerInfo],
        modex: &mut dyn Modex,
        endpoints: &mut [Option<Endpoint>],
    ) -> Result<()>;

    /// Writes the entries a process of another job needs to reach this module (its business
    /// card, [`crate::dpm::Card`]). This default is what [`Btl::publish`] writes; a module
    /// whose entries include a secret of the job leaves that out.
    fn card(&mut self, card: &mut dyn ModexPut) -> Result<()> {
        self.publish(card)
    }

    /// Decides which of `peers` — processes of other jobs that joined after init (through
    /// `MPI_Comm_connect`/`accept` or spawn) — this module can reach, as
    /// [`Btl::add_procs`] does; `modex` answers with the business cards they sent. May be
    /// called several times. This default reaches none of them.
    fn add_later(
        &mut self,
        peers: &[PeerInfo],
        modex: &mut dyn Modex,
        endpoints: &mut [Option<Endpoint>],
    ) -> Result<()> {
        let _ = (peers, modex);
        endpoints.fill(None);
        Ok(())
    }

    /// Forgets `proc`, a process of another job this module reached as `ep` ([`Btl::add_later`])
    /// which no communicator reaches any more, so that its slot can serve another process:
    /// the module closes what it holds for it once what is queued to it has left, and its
    /// frames are no longer delivered. This default suits modules that take no such peers.
    fn del_later(&mut self, proc: ProcId, ep: Endpoint) {
        let _ = (proc, ep);
    }

    /// Space for a fragment of `len` bytes to `ep`, or `None` if the module cannot take it now.
    /// `len` is at most `max_send_size`. The space is valid until the next call on this module.
    fn reserve(&mut self, ep: Endpoint, len: usize) -> Option<&mut [u8]>;

    /// Sends the first `len` bytes of the space just reserved for `ep`, tagged `tag`. Once this
    /// returns, the fragment is the module's: the caller's data may be reused.
    fn commit(&mut self, ep: Endpoint, tag: AmTag, len: usize);

    /// Sends `header` followed by `data` as one fragment to `ep`, tagged `tag`, as
    /// [`Btl::reserve`], a copy and [`Btl::commit`] would (this default does just that): once
    /// it returns, `data` may be reused. Modules with [`BtlFlags::SEND_INLINE`] write what they
    /// can at once straight from `data` (a socket write gathering it) and copy only the rest.
    /// False when the module cannot take the fragment now (back-pressure).
    fn send_inline(&mut self, ep: Endpoint, tag: AmTag, header: &[u8], data: &[u8]) -> bool {
        let len = header.len() + data.len();
        let Some(space) = self.reserve(ep, len) else {
            return false;
        };
        space[..header.len()].copy_from_slice(header);
        space[header.len()..len].copy_from_slice(data);
        self.commit(ep, tag, len);
        true
    }

    /// Sends `header` (copied now) followed by `data` (not copied: read from user memory until
    /// the send completes) as one fragment to `ep`, for modules with [`BtlFlags::SEND_REF`].
    /// `None` when the module cannot take it now (back-pressure).
    fn send_ref(
        &mut self,
        ep: Endpoint,
        tag: AmTag,
        header: &[u8],
        data: DataRef,
        token: Token,
    ) -> Option<Sent> {
        let _ = (ep, tag, header, data, token);
        None
    }

    /// Exposes `data` to the peer at `ep` for [`Btl::get`] until [`Btl::deregister`]; the key
    /// to send along, or `None` when the module cannot now (the upper layer sends the data
    /// instead). For modules with [`BtlFlags::GET`].
    fn register(&mut self, ep: Endpoint, data: DataRef) -> Option<RemoteKey> {
        let _ = (ep, data);
        None
    }

    /// Packed bytes an `RGET` offer to the peer carries after its header (the receiver takes
    /// them as it matches, and reads only the rest); 0: none. Bounded by the eager limit.
    fn rndv_eager(&self) -> usize {
        0
    }

    /// Withdraws a registration of [`Btl::register`]: the peer can no longer read it.
    fn deregister(&mut self, key: RemoteKey) {
        let _ = key;
    }

    /// Reads `dest.len()` bytes from offset `offset` of the memory the peer at `ep` registered
    /// under `key` into `dest`; [`Sink::completed`] reports `token` once they are there (or
    /// will not be). False when the module cannot start it now (back-pressure).
    fn get(
        &mut self,
        ep: Endpoint,
        key: RemoteKey,
        offset: u64,
        dest: DestRef,
        token: Token,
    ) -> bool {
        let _ = (ep, key, offset, dest, token);
        false
    }

    /// Delivers arrived fragments and completions; returns how many events it handled.
    fn progress(&mut self, sink: &mut dyn Sink) -> usize;

    /// The node-shared memory of the shared-memory collectives (`coll::sm`): that of the process
    /// at `ep`, or this process's own for `None`. Modules without such memory (every one but
    /// `sm`) answer [`AreaState::Absent`].
    fn coll_area(&mut self, ep: Option<Endpoint>) -> AreaState {
        let _ = ep;
        AreaState::Absent
    }

    /// For a module with [`BtlFlags::POLL_ON_WAKE`]: the word where it raises `bit` when it
    /// has work for its next poll.
    fn set_wake(&mut self, wake: &'static AtomicU32, bit: u32) {
        let _ = (wake, bit);
    }

    /// The module's put, get and atomics for one-sided windows (Open MPI's BTL RDMA interface
    /// that `osc/rdma` drives), when it has them and they are wanted; windows whose members it
    /// all reaches ([`crate::osc::rdma::Rdma::reaches`]) then move their data with them.
    fn rdma(&self) -> Option<&'static dyn crate::osc::rdma::Rdma> {
        None
    }

    /// Tears the module down at finalize.
    fn finalize(&mut self) {}
}
