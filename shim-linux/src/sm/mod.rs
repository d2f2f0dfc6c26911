//! The `sm` BTL: fragments between processes of one node through shared memory.
//!
//! Every process on a node creates one segment file, `<btl_sm_backing_directory>/stormpi-<job>-sm-
//! <rank>` (mode 0600), holding one inbound ring per other local process ([`segment`]). A sender
//! maps the receiver's segment the first time it sends to it and writes its fragments straight
//! into its own ring there: the PML packs header and payload into the space [`Btl::reserve`]
//! returns, so a fragment is copied once on the way in and once on the way out. Each ring has one
//! producer and one consumer and needs no lock ([`ring`]). The receiver's progress polls all of its
//! inbound rings.
//!
//! Large messages take one copy where the kernel allows it ([`cma`]): the module has
//! [`BtlFlags::GET`], [`Btl::register`] names the sender's buffer by its address, and the
//! receiver's [`Btl::get`] reads it with `process_vm_readv` straight into the receive buffer
//! (the engine's `RGET` rendezvous). `btl_sm_single_copy` chooses; it is off by default, since
//! the rings' two copies, pipelined through a cache-sized ring, measured faster on the machines
//! at hand (see the README). When the kernel forbids the call (probed at start, or refused
//! later) the rings carry everything, and a read that fails midway completes with an error
//! naming the cause, on which the engine asks for fragments.
//!
//! One-sided windows over the user's memory may put and get by single copy too ([`osc`],
//! `osc_sm_single_copy`, off by default): the module offers them as its [`Btl::rdma`].
//!
//! Names derive from the job id and world ranks, so nothing goes through the modex; a peer that
//! has not created its segment yet is back-pressure (`reserve` returns `None`) until it has.
//!
//! Processes are numbered on their node by world rank (local index `0..L`). Receiver `r`'s
//! segment holds `L - 1` rings; sender `s` uses ring `s` if `s < r`, else `s - 1`.

mod cma;
pub(crate) mod osc;
mod ring;
pub(crate) mod segment;

use std::path::PathBuf;

use stormpi_core::arch::Arch;
use stormpi_core::btl::{
    AmTag, AreaState, Btl, BtlAttrs, BtlFlags, DataRef, DestRef, Endpoint, Modex, PeerInfo,
    RemoteKey, Sink, Token,
};
use stormpi_core::error::{Allowed, Error, ErrorClass, Reason, Result};
use stormpi_core::params::{Default, Kind, ParamDef, Params};
use stormpi_core::platform::Platform;
use stormpi_core::rte::ProcId;

use ring::{min_ring_bytes, Consumer, Producer};
use segment::{Attaching, Expect, Geometry, SegError, Segment, MAX_RINGS, MAX_RING_BYTES};

/// `btl_sm_eager_limit`.
pub static EAGER_LIMIT: ParamDef = ParamDef {
    name: "btl_sm_eager_limit",
    kind: Kind::Int {
        min: 64,
        max: 1 << 26,
    },
    default: Default::Int(4096),
    description: "Largest message (header included) the sm BTL sends eagerly, in one fragment",
};

/// `btl_sm_max_send_size`.
pub static MAX_SEND_SIZE: ParamDef = ParamDef {
    name: "btl_sm_max_send_size",
    kind: Kind::Int {
        min: 64,
        max: 1 << 26,
    },
    default: Default::Int(64 << 10),
    description: "Largest fragment of the sm BTL, header included",
};

/// `btl_sm_ring_bytes`.
pub static RING_BYTES: ParamDef = ParamDef {
    name: "btl_sm_ring_bytes",
    kind: Kind::Int {
        min: 4096,
        max: MAX_RING_BYTES as i64,
    },
    default: Default::Int(1 << 20),
    description: "Bytes of each inbound ring of the sm BTL (one per local sender), rounded up to \
                  a power of two; at least twice btl_sm_max_send_size",
};

/// `btl_sm_backing_directory`.
pub static BACKING_DIRECTORY: ParamDef = ParamDef {
    name: "btl_sm_backing_directory",
    kind: Kind::Str,
    default: Default::Str("/dev/shm"),
    description: "Directory (a tmpfs) of the sm BTL's segment files",
};

/// `btl_sm_single_copy`.
pub static SINGLE_COPY: ParamDef = ParamDef {
    name: "btl_sm_single_copy",
    kind: Kind::Str,
    default: Default::Str("off"),
    description: "Large messages read straight from the sender's buffer with process_vm_readv \
                  (one copy) instead of two copies through the rings: auto (where the kernel \
                  allows it), on (start fails if it does not) or off (the default: the \
                  pipelined rings measured faster, see the README)",
};

/// `btl_sm_single_copy_min`.
pub static SINGLE_COPY_MIN: ParamDef = ParamDef {
    name: "btl_sm_single_copy_min",
    kind: Kind::Int {
        min: 0,
        max: i64::MAX,
    },
    default: Default::Int(32 << 10),
    description: "Messages of at least this many bytes go by single copy (btl_sm_single_copy); \
                  smaller ones through the rings",
};

/// The `sm` BTL's exclusivity: above `tcp`'s, so node-local peers use shared memory only.
pub const EXCLUSIVITY: u32 = 1000;

/// Parameters of the sm BTL.
pub static PARAMS: [&ParamDef; 7] = [
    &EAGER_LIMIT,
    &MAX_SEND_SIZE,
    &RING_BYTES,
    &BACKING_DIRECTORY,
    &SINGLE_COPY,
    &SINGLE_COPY_MIN,
    &osc::OSC_SM_SINGLE_COPY,
];

/// Longest job id accepted (it becomes part of a file name).
const MAX_JOB_ID: usize = 64;

/// The `sm` BTL module of one process.
///
/// Dropping it unmaps every segment but leaves its own segment file in place (a process that
/// skipped [`Btl::finalize`] may be failing; its peers may still be reading); `finalize` removes it.
pub struct Sm {
    attrs: BtlAttrs,
    me: ProcId,
    job: String,
    dir: PathBuf,
    ring_bytes: usize,
    /// Bytes of each segment's collective area.
    coll_bytes: usize,
    /// Processes of this node by local index (empty until `add_procs`); the endpoint of a peer is
    /// its local index.
    peers: Vec<Peer>,
    /// Inbound rings of our segment, with the world rank of their sender.
    inbound: Vec<(ProcId, Consumer)>,
    /// Our segment and its file, while we have one.
    own: Option<(Segment, PathBuf)>,
    /// Finished single-copy reads, reported at the next progress.
    reads_done: Vec<(Token, Result<()>)>,
    /// Single-copy one-sided operations (`osc_sm_single_copy`), when wanted and allowed.
    osc: Option<&'static osc::SmRdma>,
    added: bool,
    finalized: bool,
}

/// A process of this node as a destination.
struct Peer {
    proc: ProcId,
    path: PathBuf,
    want: Expect,
    tx: Tx,
    /// Whether its memory can be read by single copy.
    cma: Cma,
}

/// Single-copy reads from one peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cma {
    /// Not tried yet.
    Unchecked,
    /// Read through this process id.
    Pid(u32),
    /// Refused for the reason given (logged once): every read completes with an error naming
    /// it, and the engine asks for fragments.
    Refused(&'static str),
}

/// Sending state towards one local process.
enum Tx {
    /// This process: served by the `self` BTL.
    Me,
    /// The peer's segment is not mapped yet.
    Attaching(Attaching),
    /// Mapped; `prod` writes into our ring in `_seg`, which stays mapped as long as `prod` lives.
    Ready { prod: Producer, _seg: Segment },
    /// Refused (corrupt or foreign segment); logged once. A segment that was mapped stays
    /// mapped: the collectives may hold pointers into its collective area.
    Failed { _mapped: Option<Segment> },
}

impl Sm {
    /// A module for process `me` of job `job` (a short `[A-Za-z0-9-]` id unique to the job, e.g.
    /// `STORMPI_JOBID` under stormrun). Creates nothing yet: the segment is made in `add_procs`,
    /// once the processes on this node are known.
    pub fn new(params: &Params, job: &str, me: ProcId) -> Result<Sm> {
        if job.is_empty()
            || job.len() > MAX_JOB_ID
            || !job.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err(Error::bad_arg(
                "sm: the job id must be 1 to 64 characters of [A-Za-z0-9-]",
            ));
        }
        let max_send = params.usize(&MAX_SEND_SIZE);
        let eager = params.usize(&EAGER_LIMIT).min(max_send);
        let ring_bytes = params.usize(&RING_BYTES).next_power_of_two();
        if ring_bytes < min_ring_bytes(max_send) || ring_bytes > MAX_RING_BYTES {
            return Err(Error::new(
                ErrorClass::Arg,
                Reason::BadParam {
                    name: RING_BYTES.name,
                    allowed: Allowed::Range {
                        min: min_ring_bytes(max_send) as i64,
                        max: MAX_RING_BYTES as i64,
                    },
                },
            ));
        }
        let mode = cma::Mode::parse(SINGLE_COPY.name, params.str(&SINGLE_COPY))?;
        let single_copy = match mode {
            cma::Mode::Off => false,
            _ => match cma::probe_self() {
                Ok(()) => true,
                Err(e) if mode == cma::Mode::On => {
                    eprintln!(
                        "stormpi sm (rank {}): btl_sm_single_copy=on, but process_vm_readv \
                         does not work here: {e}",
                        me.0
                    );
                    return Err(Error::new(
                        ErrorClass::Other,
                        Reason::Transport {
                            btl: "sm",
                            what: "btl_sm_single_copy=on, but the kernel refuses \
                                   process_vm_readv (ptrace scope, seccomp or container policy)",
                        },
                    ));
                }
                Err(_) => false,
            },
        };
        let dir = params.str(&BACKING_DIRECTORY);
        if dir.is_empty() {
            return Err(Error::new(
                ErrorClass::Arg,
                Reason::BadParam {
                    name: BACKING_DIRECTORY.name,
                    allowed: Allowed::Text("a directory's path"),
                },
            ));
        }
        Ok(Sm {
            attrs: BtlAttrs {
                component: "sm",
                eager_limit: eager,
                max_send_size: max_send,
                latency_ns: 300,
                bandwidth_mbps: 80_000,
                exclusivity: EXCLUSIVITY,
                flags: if single_copy {
                    BtlFlags::SEND.union(BtlFlags::GET)
                } else {
                    BtlFlags::SEND
                },
                get_min: params.usize(&SINGLE_COPY_MIN),
            },
            me,
            job: job.to_owned(),
            dir: PathBuf::from(dir),
            ring_bytes,
            coll_bytes: stormpi_core::coll::sm::area_bytes(params),
            peers: Vec::new(),
            inbound: Vec::new(),
            own: None,
            reads_done: Vec::new(),
            osc: None,
            added: false,
            finalized: false,
        })
    }

    /// Offers single-copy one-sided operations to windows over the user's memory as
    /// `osc_sm_single_copy` asks (`on`: an error if the kernel refuses `process_vm_readv`);
    /// `platform` logs. Before [`Btl::add_procs`].
    pub fn enable_osc(&mut self, params: &Params, platform: &'static dyn Platform) -> Result<()> {
        let mode = cma::Mode::parse(
            osc::OSC_SM_SINGLE_COPY.name,
            params.str(&osc::OSC_SM_SINGLE_COPY),
        )?;
        if mode == cma::Mode::Off {
            return Ok(());
        }
        match cma::probe_self() {
            Ok(()) => {
                let r: &'static osc::SmRdma =
                    Box::leak(Box::new(osc::SmRdma::new(self.me.0, platform)));
                self.osc = Some(r);
                Ok(())
            }
            Err(e) if mode == cma::Mode::On => {
                eprintln!(
                    "stormpi sm (rank {}): osc_sm_single_copy=on, but process_vm_readv does \
                     not work here: {e}",
                    self.me.0
                );
                Err(Error::new(
                    ErrorClass::Other,
                    Reason::Transport {
                        btl: "sm",
                        what: "osc_sm_single_copy=on, but the kernel refuses process_vm_readv \
                               (ptrace scope, seccomp or container policy)",
                    },
                ))
            }
            Err(_) => Ok(()),
        }
    }

    /// The segment file of process `proc` of this job.
    fn segment_path(&self, proc: ProcId) -> PathBuf {
        self.dir.join(format!("stormpi-{}-sm-{}", self.job, proc.0))
    }

    /// Moves peer `i` towards a usable ring; whether it is usable now.
    #[cold]
    #[inline(never)]
    fn connect(&mut self, i: usize) -> bool {
        let me = self.me;
        let Some(peer) = self.peers.get_mut(i) else {
            return false;
        };
        match &mut peer.tx {
            Tx::Me | Tx::Failed { .. } => false,
            Tx::Ready { prod, .. } => {
                if let Some(c) = prod.fault() {
                    eprintln!(
                        "stormpi sm (rank {}): the ring to rank {} is corrupt ({c}); no longer \
                         sending to it through sm",
                        me.0, peer.proc.0
                    );
                    if let Tx::Ready { _seg: seg, .. } =
                        std::mem::replace(&mut peer.tx, Tx::Failed { _mapped: None })
                    {
                        peer.tx = Tx::Failed { _mapped: Some(seg) };
                    }
                    return false;
                }
                true
            }
            Tx::Attaching(a) => match a.step(&peer.path, &peer.want) {
                Ok(None) => false,
                Ok(Some(seg)) => match Producer::new(seg.ring(peer.want.ring)) {
                    Ok(prod) => {
                        peer.tx = Tx::Ready { prod, _seg: seg };
                        true
                    }
                    Err(c) => {
                        eprintln!(
                            "stormpi sm (rank {}): refusing the segment of rank {}: {c}",
                            me.0, peer.proc.0
                        );
                        peer.tx = Tx::Failed { _mapped: None };
                        false
                    }
                },
                Err(e) => {
                    eprintln!(
                        "stormpi sm (rank {}): refusing the segment of rank {}: {e}",
                        me.0, peer.proc.0
                    );
                    peer.tx = Tx::Failed { _mapped: None };
                    false
                }
            },
        }
    }
}

/// Index of sender `s`'s ring in receiver `r`'s segment (local indices, `s != r`).
fn ring_index(s: u32, r: u32) -> u32 {
    if s < r {
        s
    } else {
        s - 1
    }
}

fn transport(e: SegError, me: ProcId) -> Error {
    eprintln!("stormpi sm (rank {}): {e}", me.0);
    Error::new(
        ErrorClass::Other,
        Reason::Transport {
            btl: "sm",
            what: e.what,
        },
    )
}

impl Btl for Sm {
    fn attrs(&self) -> &BtlAttrs {
        &self.attrs
    }

    fn add_procs(
        &mut self,
        peers: &[PeerInfo],
        _modex: &mut dyn Modex,
        endpoints: &mut [Option<Endpoint>],
    ) -> Result<()> {
        if self.added || self.finalized {
            return Err(Error::bad_arg(
                "sm: add_procs called twice, or after finalize",
            ));
        }
        if peers.len() != endpoints.len() {
            return Err(Error::bad_arg(
                "sm: peer and endpoint tables differ in length",
            ));
        }
        let me = self.me;
        let node = peers
            .iter()
            .find(|p| p.proc == me)
            .ok_or(Error::bad_arg(
                "sm: the own process is not in the peer table",
            ))?
            .node;
        // Rings carry native-endian headers and words: only processes of this architecture share
        // them (others on the node are reached by a network BTL, whose headers say their order).
        let same_form =
            |p: &PeerInfo| p.proc == me || p.arch.is_some_and(|a| a.same_as(Arch::LOCAL));
        let mut local: Vec<ProcId> = peers
            .iter()
            .filter(|p| p.node == node && same_form(p))
            .map(|p| p.proc)
            .collect();
        local.sort_unstable();
        if local.windows(2).any(|w| w[0] == w[1]) {
            return Err(Error::bad_arg(
                "sm: a process appears twice in the peer table",
            ));
        }
        if local.len() > MAX_RINGS as usize + 1 {
            return Err(Error::unsupported("more than 65537 processes on one node"));
        }
        let nlocal = local.len() as u32;
        let mine = local
            .binary_search(&me)
            .map_err(|_| Error::internal("sm: the own process is not among the local ones"))?
            as u32;
        for (p, ep) in peers.iter().zip(endpoints.iter_mut()) {
            *ep = if p.node == node && p.proc != me && same_form(p) {
                local
                    .binary_search(&p.proc)
                    .ok()
                    .map(|i| Endpoint(i as u32))
            } else {
                None
            };
        }
        self.added = true;
        if nlocal < 2 {
            return Ok(());
        }

        let max_send = self.attrs.max_send_size;
        let geo = Geometry {
            nrings: nlocal - 1,
            ring_bytes: self.ring_bytes,
            max_frag: max_send as u32,
            coll_bytes: self.coll_bytes,
        };
        let path = self.segment_path(me);
        let seg = Segment::create(&path, me.0, geo).map_err(|e| transport(e, me))?;
        self.inbound = (0..nlocal)
            .filter(|&s| s != mine)
            .map(|s| {
                let ring = seg.ring(ring_index(s, mine));
                (local[s as usize], Consumer::new(ring, max_send))
            })
            .collect();
        seg.publish();
        self.own = Some((seg, path));
        if let Some(o) = self.osc {
            o.add_peers(local.iter().map(|&p| (p.0, self.segment_path(p))));
        }
        self.peers = (0..nlocal)
            .map(|r| {
                let proc = local[r as usize];
                Peer {
                    proc,
                    path: self.segment_path(proc),
                    want: Expect {
                        owner: proc.0,
                        nrings: nlocal - 1,
                        ring: if r == mine { 0 } else { ring_index(mine, r) },
                        max_len: max_send,
                        coll_bytes: self.coll_bytes,
                    },
                    tx: if r == mine {
                        Tx::Me
                    } else {
                        Tx::Attaching(Attaching::default())
                    },
                    cma: Cma::Unchecked,
                }
            })
            .collect();
        Ok(())
    }

    #[inline]
    fn reserve(&mut self, ep: Endpoint, len: usize) -> Option<&mut [u8]> {
        debug_assert!(
            len <= self.attrs.max_send_size,
            "sm: fragment above max_send_size"
        );
        if len > self.attrs.max_send_size {
            return None;
        }
        let i = ep.0 as usize;
        let usable = matches!(
            self.peers.get(i)?.tx,
            Tx::Ready { ref prod, .. } if prod.fault().is_none()
        );
        if !usable && !self.connect(i) {
            return None;
        }
        match &mut self.peers[i].tx {
            Tx::Ready { prod, .. } => prod.reserve(len),
            _ => None,
        }
    }

    #[inline]
    fn commit(&mut self, ep: Endpoint, tag: AmTag, len: usize) {
        match self.peers.get_mut(ep.0 as usize).map(|p| &mut p.tx) {
            Some(Tx::Ready { prod, .. }) => prod.commit(tag, len),
            _ => debug_assert!(false, "sm: commit to an endpoint without a reservation"),
        }
    }

    fn register(&mut self, ep: Endpoint, data: DataRef) -> Option<RemoteKey> {
        let peer = self.peers.get(ep.0 as usize)?;
        if !self.attrs.flags.contains(BtlFlags::GET) || matches!(peer.cma, Cma::Refused(_)) {
            return None;
        }
        // Nothing to pin: the reader names the memory by its address in this process.
        Some(RemoteKey(data.as_ptr() as u64))
    }

    fn get(
        &mut self,
        ep: Endpoint,
        key: RemoteKey,
        offset: u64,
        dest: DestRef,
        token: Token,
    ) -> bool {
        let i = ep.0 as usize;
        let me = self.me;
        let Some(peer) = self.peers.get(i) else {
            self.reads_done.push((
                token,
                Err(Error::bad_arg("sm: get from an unknown endpoint")),
            ));
            return true;
        };
        if peer.cma == Cma::Unchecked && matches!(peer.tx, Tx::Attaching(_)) {
            self.connect(i);
            if matches!(self.peers[i].tx, Tx::Attaching(_)) {
                // The peer's segment, which says how to read it, is not mapped yet.
                return false;
            }
        }
        let peer = &mut self.peers[i];
        if peer.cma == Cma::Unchecked {
            peer.cma = match &peer.tx {
                Tx::Ready { _seg: seg, .. } => match cma::check_peer(seg) {
                    Ok(pid) => Cma::Pid(pid),
                    Err((what, e)) => {
                        eprintln!(
                            "stormpi sm (rank {}): no single copy from rank {}: {what} ({e}); \
                             its messages go through the ring",
                            me.0, peer.proc.0
                        );
                        if cma::is_policy(&e) {
                            self.attrs.flags = self.attrs.flags.without(BtlFlags::GET);
                        }
                        Cma::Refused(what)
                    }
                },
                _ => Cma::Refused("the peer's segment could not be mapped"),
            };
        }
        let Cma::Pid(pid) = peer.cma else {
            let what = match peer.cma {
                Cma::Refused(what) => what,
                _ => "single copy from this peer was not checked",
            };
            self.reads_done.push((
                token,
                Err(Error::new(
                    ErrorClass::Other,
                    Reason::Transport { btl: "sm", what },
                )),
            ));
            return true;
        };
        // SAFETY: the engine lends `dest` for writing until we report the token.
        let r = unsafe { cma::read(pid, key.0.wrapping_add(offset), dest.as_ptr(), dest.len()) };
        let result = r.map_err(|e| {
            eprintln!(
                "stormpi sm (rank {}): single-copy read of {} bytes from rank {} failed: {e}",
                me.0,
                dest.len(),
                peer.proc.0
            );
            if cma::is_policy(&e) {
                // The kernel's policy changed: stop offering and reading, for every peer.
                eprintln!(
                    "stormpi sm (rank {}): single copy is off from now on; large messages go \
                     through the rings",
                    me.0
                );
                self.attrs.flags = self.attrs.flags.without(BtlFlags::GET);
            }
            cma::failure(&e)
        });
        self.reads_done.push((token, result));
        true
    }

    #[inline]
    fn progress(&mut self, sink: &mut dyn Sink) -> usize {
        let mut n = 0;
        if !self.reads_done.is_empty() {
            for (token, result) in self.reads_done.drain(..) {
                sink.completed(token, result);
                n += 1;
            }
        }
        for (from, ring) in self.inbound.iter_mut() {
            let from = *from;
            match ring.poll(|tag, frag| sink.deliver(from, tag, frag)) {
                Ok(k) => n += k,
                Err(fault) => {
                    n += fault.delivered;
                    eprintln!(
                        "stormpi sm (rank {}): the ring from rank {} is corrupt ({}); ignoring \
                         it from now on",
                        self.me.0, from.0, fault.corrupt
                    );
                }
            }
        }
        n
    }

    fn coll_area(&mut self, ep: Option<Endpoint>) -> AreaState {
        let Some(ep) = ep else {
            return match &self.own {
                Some((seg, _)) => seg.coll_area().map_or(AreaState::Absent, AreaState::Mapped),
                None => AreaState::Absent,
            };
        };
        let i = ep.0 as usize;
        if matches!(self.peers.get(i).map(|p| &p.tx), Some(Tx::Attaching(_))) {
            self.connect(i);
        }
        match self.peers.get(i).map(|p| &p.tx) {
            Some(Tx::Ready { _seg: seg, .. }) => {
                seg.coll_area().map_or(AreaState::Absent, AreaState::Mapped)
            }
            Some(Tx::Attaching(_)) => AreaState::Pending,
            _ => AreaState::Absent,
        }
    }

    fn rdma(&self) -> Option<&'static dyn stormpi_core::osc::rdma::Rdma> {
        self.osc
            .map(|o| o as &'static dyn stormpi_core::osc::rdma::Rdma)
    }

    fn finalize(&mut self) {
        self.finalized = true;
        if let Some(o) = self.osc {
            o.close();
        }
        // Unmap peers' segments and our rings, then remove our file.
        self.peers.clear();
        self.inbound.clear();
        if let Some((seg, path)) = self.own.take() {
            drop(seg);
            if let Err(e) = std::fs::remove_file(&path) {
                eprintln!(
                    "stormpi sm (rank {}): cannot remove {}: {e}",
                    self.me.0,
                    path.display()
                );
            }
        }
    }
}

#[cfg(test)]
mod tests;
