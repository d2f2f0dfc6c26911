//! The device's semantics: protection domains, memory regions and their keys, completion
//! queues, shared receive queues, and reliable-connected queue pairs with their state machine,
//! requester and responder, behind one process-wide [`Device`].
//!
//! **Requester.** A posted send work request becomes a WQE with a packet sequence number (PSN).
//! WQEs are transmitted in order as `REQ` records into the ring of the destination LID. A send of
//! up to [`BYTES_LIMIT`] bytes travels in the record (gathered from the user's buffers when it is
//! transmitted; inline data is captured when posted); anything else — larger sends, every RDMA
//! write and read — as the list of the requester's buffers, which the responder copies from (or,
//! for a read, into) with one `process_vm_readv`/`process_vm_writev`. A WQE completes when its
//! response arrives; responses arrive in PSN order.
//!
//! **Atomics.** A fetch-and-add or compare-and-swap travels as the requester's 8-byte buffer
//! (like a read's) followed by its two operands. The responder checks the rkey, bounds, 8-byte
//! alignment and `IBV_ACCESS_REMOTE_ATOMIC` (region and QP), applies it with a CPU atomic
//! instruction on its own memory, and writes the old value into the requester's buffer with
//! `process_vm_writev`. Being run by the target process (below), an atomic is applied when the
//! target next calls into the device.
//!
//! **Responder.** Runs in the process that owns the target QP whenever it calls into the device
//! (`ibv_poll_cq`, posting): there is no adapter to do it meanwhile. It executes requests only in
//! PSN order, so everything the requester sends after a request that could not be executed is
//! dropped and sent again (go-back-N), which keeps an RC QP's ordering. It checks the rkey, the
//! bounds and the access flags of the memory region and of the QP, and answers `ACK` or a NAK.
//!
//! **Errors as an adapter reports them.** No receive posted: an RNR NAK; the requester waits the
//! responder's minimum RNR timer and retries, `rnr_retry` times (7: forever), then completes
//! with `IBV_WC_RNR_RETRY_EXC_ERR`. Bad rkey, bounds or rights: `IBV_WC_REM_ACCESS_ERR`. A
//! responder QP that does not exist, is not connected to the requester or is not ready (RESET,
//! INIT, ERR) makes the requester retry after its `timeout`, `retry_cnt` times, then complete
//! with `IBV_WC_RETRY_EXC_ERR`; so does a peer that does not answer for that long. Any error
//! completion moves the QP to the error state, which flushes every outstanding work request
//! with `IBV_WC_WR_FLUSH_ERR`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use crate::cma::{cma, scatter};
pub use crate::config::Config;
use crate::frames::Frames;
use crate::ring::{flag, kind, syndrome, Consumer, Geometry, Pkt, Producer, Segment, TakeError};
use crate::types::*;

/// Sends up to this many bytes travel inside the ring record; larger ones, and RDMA writes and
/// reads of any size, are copied once, by cross-memory attach, between the two processes'
/// buffers.
pub const BYTES_LIMIT: usize = 8192;
/// Largest message (the port's `max_msg_sz`).
pub const MAX_MSG: u64 = 1 << 31;
/// Scatter/gather entries per work request.
pub const MAX_SGE: u32 = 16;
/// Work requests per queue.
pub const MAX_WR: u32 = 16384;
/// Entries per completion queue.
pub const MAX_CQE: u32 = 1 << 20;
/// Bytes a send may carry with `IBV_SEND_INLINE`.
pub const MAX_INLINE: u32 = 1024;
const PSN_MASK: u32 = 0xff_ffff;

/// The minimum RNR timer's encoding (IB specification, 5-bit code) in microseconds.
const RNR_TIMER_US: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840,
    5120, 7680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840, 245_760,
    327_680, 491_520,
];

/// The local ACK timeout: 4.096 us × 2^`timeout`; `None` for 0 (wait forever).
fn ack_timeout(timeout: u8) -> Option<Duration> {
    (timeout != 0).then(|| Duration::from_nanos(4096u64 << timeout.min(31)))
}

/// A registered memory region.
#[derive(Debug)]
pub struct Mr {
    pub pd: u32,
    pub addr: u64,
    pub len: u64,
    pub access: i32,
    /// The page frames registered (`None`: not visible, not checked).
    pub frames: Option<Frames>,
}

impl Mr {
    /// Whether `[addr, addr + len)` lies in the region.
    fn covers(&self, addr: u64, len: u64) -> bool {
        addr >= self.addr
            && addr
                .checked_add(len)
                .is_some_and(|end| end <= self.addr + self.len)
    }

    /// Whether `[addr, addr + len)` lies in the region and is still backed by the pages
    /// registered (a stale registration is reported on stderr: it is a bug of the program).
    /// Asked of RDMA reads and writes, local and remote buffers both — what a registration
    /// cache serves; sends and receives (a program's long-lived buffers) skip the page-table
    /// read.
    fn holds(&self, addr: u64, len: u64) -> bool {
        let inside = self.covers(addr, len);
        if inside && self.frames.as_ref().is_some_and(|f| !f.still(addr, len)) {
            eprintln!(
                "verbs-shmem: the memory region at {:#x} ({} bytes) is used after its pages were unmapped or replaced (a stale registration)",
                self.addr, self.len
            );
            return false;
        }
        inside
    }
}

/// A completion queue.
pub struct Cq {
    cap: usize,
    wcs: VecDeque<ibv_wc>,
    /// A completion found the queue full (the adapter's CQ overrun): polls fail from then on.
    overrun: bool,
}

/// A posted receive.
#[derive(Clone, Debug)]
struct RecvWqe {
    wr_id: u64,
    sges: Vec<ibv_sge>,
}

/// A shared receive queue.
pub struct Srq {
    pd: u32,
    cap: usize,
    max_sge: usize,
    wrs: VecDeque<RecvWqe>,
}

/// A send WQE's data.
enum Data {
    /// Inline data, captured when posted.
    Bytes(Vec<u8>),
    /// The requester's registered buffers: `(address, length)`; with `by_ring` their bytes are
    /// gathered into the request record, else the list itself is sent.
    Iov { iov: Vec<(u64, u64)>, by_ring: bool },
}

struct SendWqe {
    wr_id: u64,
    opcode: u32,
    signaled: bool,
    psn: u32,
    data: Data,
    length: u64,
    remote_addr: u64,
    rkey: u32,
    imm: Option<u32>,
    /// An atomic's operands: compare (or add) and swap.
    operands: (u64, u64),
    rnr_left: u8,
}

fn is_atomic(opcode: u32) -> bool {
    matches!(
        opcode,
        IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD
    )
}

/// A reliable-connected queue pair.
pub struct Qp {
    pd: u32,
    send_cq: u32,
    recv_cq: u32,
    srq: Option<u32>,
    sig_all: bool,
    pub state: u32,
    cap: ibv_qp_cap,
    access: u32,
    dlid: u16,
    dqpn: u32,
    /// The next PSN the responder expects.
    epsn: u32,
    /// The PSN the next posted WQE gets.
    npsn: u32,
    min_rnr_timer: u8,
    timeout: u8,
    retry_cnt: u8,
    rnr_retry: u8,
    sq: VecDeque<SendWqe>,
    /// WQEs `sq[..next_tx]` are on the wire awaiting their response.
    next_tx: usize,
    /// Transmit nothing before this (after a NAK).
    resend_at: Option<Instant>,
    retries_left: u8,
    last_heard: Instant,
    rq: VecDeque<RecvWqe>,
}

struct Peer {
    seg: Segment,
    prod: Producer,
    /// Responses that found the ring full, in order.
    backlog: VecDeque<Pkt>,
}

/// The process's port and everything created on it.
pub struct Device {
    pub fabric: String,
    pub lid: u16,
    geo: Geometry,
    /// Messages up to this many bytes travel in the record: [`BYTES_LIMIT`], or less in small
    /// rings.
    bytes_limit: usize,
    seg: Segment,
    inbound: Vec<Consumer>,
    peers: HashMap<u16, Peer>,
    next_id: u32,
    pub pds: HashSet<u32>,
    pub mrs: HashMap<u32, Mr>,
    cqs: HashMap<u32, Cq>,
    srqs: HashMap<u32, Srq>,
    pub qps: HashMap<u32, Qp>,
}

/// An `errno` value, as the verbs calls return them.
pub type Errno = i32;

impl Device {
    /// Takes a LID and creates this process's segment.
    pub fn open(cfg: Config) -> Result<Device, String> {
        let (lid, seg) = match cfg.lid {
            Some(lid) => match Segment::take(&cfg.fabric, lid, cfg.geo) {
                Ok(s) => (lid, s),
                Err(TakeError::InUse) => {
                    return Err(format!(
                        "LID {lid} of fabric {} is held by a live process",
                        cfg.fabric
                    ))
                }
                Err(TakeError::Io(e)) => return Err(format!("shared memory segment: {e}")),
            },
            None => {
                let mut found = None;
                for lid in 1..cfg.geo.lids as u16 {
                    match Segment::take(&cfg.fabric, lid, cfg.geo) {
                        Ok(s) => {
                            found = Some((lid, s));
                            break;
                        }
                        Err(TakeError::InUse) => continue,
                        Err(TakeError::Io(e)) => return Err(format!("shared memory segment: {e}")),
                    }
                }
                found.ok_or_else(|| {
                    format!(
                        "all {} LIDs of fabric {} are taken: raise STORMPI_VERBS_LIDS",
                        cfg.geo.lids - 1,
                        cfg.fabric
                    )
                })?
            }
        };
        Ok(Device {
            fabric: cfg.fabric,
            lid,
            geo: cfg.geo,
            bytes_limit: BYTES_LIMIT.min(cfg.geo.max_payload()),
            seg,
            inbound: (0..cfg.geo.lids).map(|_| Consumer::default()).collect(),
            peers: HashMap::new(),
            next_id: 1,
            pds: HashSet::new(),
            mrs: HashMap::new(),
            cqs: HashMap::new(),
            srqs: HashMap::new(),
            qps: HashMap::new(),
        })
    }

    /// Removes the segment's name (the device is being closed).
    pub fn close(&self) {
        Segment::unlink(&self.fabric, self.lid);
    }

    /// A fresh id for a PD, CQ, SRQ, QP number or memory key (never 0).
    pub fn id(&mut self) -> u32 {
        let id = self.next_id;
        // QP numbers are 24 bits.
        self.next_id = if id >= PSN_MASK { 1 } else { id + 1 };
        id
    }

    /// The GID of the port: link-local prefix, interface id naming the LID.
    pub fn gid(&self) -> [u8; 16] {
        let mut g = [0u8; 16];
        g[0] = 0xfe;
        g[1] = 0x80;
        g[8..12].copy_from_slice(b"swvb");
        g[14..16].copy_from_slice(&self.lid.to_be_bytes());
        g
    }

    pub fn create_cq(&mut self, cqe: u32) -> Result<(u32, u32), Errno> {
        if cqe == 0 || cqe > MAX_CQE {
            return Err(libc::EINVAL);
        }
        let id = self.id();
        self.cqs.insert(
            id,
            Cq {
                cap: cqe as usize,
                wcs: VecDeque::new(),
                overrun: false,
            },
        );
        Ok((id, cqe))
    }

    pub fn destroy_cq(&mut self, id: u32) -> Result<(), Errno> {
        if self
            .qps
            .values()
            .any(|q| q.send_cq == id || q.recv_cq == id)
        {
            return Err(libc::EBUSY);
        }
        self.cqs.remove(&id).map(|_| ()).ok_or(libc::EINVAL)
    }

    pub fn create_srq(&mut self, pd: u32, attr: &mut ibv_srq_attr) -> Result<u32, Errno> {
        if attr.max_wr == 0 || attr.max_wr > MAX_WR || attr.max_sge > MAX_SGE {
            return Err(libc::EINVAL);
        }
        attr.max_sge = attr.max_sge.max(1);
        let id = self.id();
        self.srqs.insert(
            id,
            Srq {
                pd,
                cap: attr.max_wr as usize,
                max_sge: attr.max_sge as usize,
                wrs: VecDeque::new(),
            },
        );
        Ok(id)
    }

    pub fn destroy_srq(&mut self, id: u32) -> Result<(), Errno> {
        if self.qps.values().any(|q| q.srq == Some(id)) {
            return Err(libc::EBUSY);
        }
        self.srqs.remove(&id).map(|_| ()).ok_or(libc::EINVAL)
    }

    /// Creates an RC QP in RESET; `cap` is updated to what was granted.
    pub fn create_qp(
        &mut self,
        pd: u32,
        send_cq: u32,
        recv_cq: u32,
        srq: Option<u32>,
        cap: &mut ibv_qp_cap,
        sig_all: bool,
    ) -> Result<u32, Errno> {
        if !self.cqs.contains_key(&send_cq) || !self.cqs.contains_key(&recv_cq) {
            return Err(libc::EINVAL);
        }
        if srq.is_some_and(|s| !self.srqs.contains_key(&s)) {
            return Err(libc::EINVAL);
        }
        if cap.max_send_wr > MAX_WR
            || cap.max_recv_wr > MAX_WR
            || cap.max_send_sge > MAX_SGE
            || cap.max_recv_sge > MAX_SGE
            || cap.max_inline_data > MAX_INLINE
        {
            return Err(libc::EINVAL);
        }
        cap.max_send_wr = cap.max_send_wr.max(1);
        cap.max_send_sge = cap.max_send_sge.max(1);
        if srq.is_none() {
            cap.max_recv_wr = cap.max_recv_wr.max(1);
            cap.max_recv_sge = cap.max_recv_sge.max(1);
        } else {
            cap.max_recv_wr = 0;
            cap.max_recv_sge = 0;
        }
        let qpn = self.id();
        self.qps.insert(
            qpn,
            Qp {
                pd,
                send_cq,
                recv_cq,
                srq,
                sig_all,
                state: IBV_QPS_RESET,
                cap: *cap,
                access: 0,
                dlid: 0,
                dqpn: 0,
                epsn: 0,
                npsn: 0,
                min_rnr_timer: 0,
                timeout: 0,
                retry_cnt: 0,
                rnr_retry: 0,
                sq: VecDeque::new(),
                next_tx: 0,
                resend_at: None,
                retries_left: 0,
                last_heard: Instant::now(),
                rq: VecDeque::new(),
            },
        );
        Ok(qpn)
    }

    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), Errno> {
        self.qps.remove(&qpn).map(|_| ()).ok_or(libc::EINVAL)
    }

    /// `ibv_modify_qp`: the RC state machine with the attributes each transition requires.
    pub fn modify_qp(&mut self, qpn: u32, a: &ibv_qp_attr, mask: i32) -> Result<u32, Errno> {
        let qp = self.qps.get_mut(&qpn).ok_or(libc::EINVAL)?;
        let cur = if mask & IBV_QP_CUR_STATE != 0 {
            a.cur_qp_state
        } else {
            qp.state
        };
        if cur != qp.state {
            return Err(libc::EINVAL);
        }
        let new = if mask & IBV_QP_STATE != 0 {
            a.qp_state
        } else {
            qp.state
        };
        let (required, optional) = match (cur, new) {
            (_, IBV_QPS_RESET) | (_, IBV_QPS_ERR) => (0, 0),
            (IBV_QPS_RESET, IBV_QPS_INIT) => {
                (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0)
            }
            (IBV_QPS_INIT, IBV_QPS_INIT) => {
                (0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
            }
            (IBV_QPS_INIT, IBV_QPS_RTR) => (
                IBV_QP_AV
                    | IBV_QP_PATH_MTU
                    | IBV_QP_DEST_QPN
                    | IBV_QP_RQ_PSN
                    | IBV_QP_MAX_DEST_RD_ATOMIC
                    | IBV_QP_MIN_RNR_TIMER,
                IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS,
            ),
            (IBV_QPS_RTR, IBV_QPS_RTS) => (
                IBV_QP_SQ_PSN
                    | IBV_QP_TIMEOUT
                    | IBV_QP_RETRY_CNT
                    | IBV_QP_RNR_RETRY
                    | IBV_QP_MAX_QP_RD_ATOMIC,
                IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER,
            ),
            (IBV_QPS_RTS, IBV_QPS_RTS) => (0, IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER),
            _ => return Err(libc::EINVAL),
        };
        let given = mask & !(IBV_QP_STATE | IBV_QP_CUR_STATE);
        if given & required != required || given & !(required | optional) != 0 {
            return Err(libc::EINVAL);
        }
        if given & IBV_QP_PORT != 0 && a.port_num != 1 {
            return Err(libc::EINVAL);
        }
        if given & IBV_QP_AV != 0 {
            let dlid = if a.ah_attr.is_global != 0 {
                // SAFETY: both union views are plain bytes.
                let raw = unsafe { a.ah_attr.grh.dgid.raw };
                if &raw[8..12] != b"swvb" {
                    return Err(libc::EINVAL);
                }
                u16::from_be_bytes([raw[14], raw[15]])
            } else {
                a.ah_attr.dlid
            };
            if dlid == 0 || dlid as usize >= self.geo.lids {
                return Err(libc::EINVAL);
            }
            qp.dlid = dlid;
        }
        if given & IBV_QP_ACCESS_FLAGS != 0 {
            qp.access = a.qp_access_flags;
        }
        if given & IBV_QP_DEST_QPN != 0 {
            qp.dqpn = a.dest_qp_num & PSN_MASK;
        }
        if given & IBV_QP_RQ_PSN != 0 {
            qp.epsn = a.rq_psn & PSN_MASK;
        }
        if given & IBV_QP_SQ_PSN != 0 {
            qp.npsn = a.sq_psn & PSN_MASK;
        }
        if given & IBV_QP_MIN_RNR_TIMER != 0 {
            qp.min_rnr_timer = a.min_rnr_timer & 31;
        }
        if given & IBV_QP_TIMEOUT != 0 {
            qp.timeout = a.timeout & 31;
        }
        if given & IBV_QP_RETRY_CNT != 0 {
            qp.retry_cnt = a.retry_cnt.min(7);
        }
        if given & IBV_QP_RNR_RETRY != 0 {
            qp.rnr_retry = a.rnr_retry.min(7);
        }
        match new {
            IBV_QPS_RESET => {
                qp.sq.clear();
                qp.rq.clear();
                qp.next_tx = 0;
                qp.resend_at = None;
                qp.state = IBV_QPS_RESET;
            }
            IBV_QPS_ERR => self.set_error(qpn, None),
            IBV_QPS_RTS if cur == IBV_QPS_RTR => {
                qp.retries_left = qp.retry_cnt;
                qp.state = new;
            }
            _ => qp.state = new,
        }
        Ok(new)
    }

    fn push_wc(&mut self, cq: u32, wc: ibv_wc) {
        if let Some(cq) = self.cqs.get_mut(&cq) {
            if cq.wcs.len() >= cq.cap {
                cq.overrun = true;
            } else {
                cq.wcs.push_back(wc);
            }
        }
    }

    fn send_wc(qpn: u32, w: &SendWqe, status: u32) -> ibv_wc {
        ibv_wc {
            wr_id: w.wr_id,
            status,
            opcode: match w.opcode {
                IBV_WR_RDMA_WRITE | IBV_WR_RDMA_WRITE_WITH_IMM => IBV_WC_RDMA_WRITE,
                IBV_WR_RDMA_READ => IBV_WC_RDMA_READ,
                IBV_WR_ATOMIC_CMP_AND_SWP => IBV_WC_COMP_SWAP,
                IBV_WR_ATOMIC_FETCH_AND_ADD => IBV_WC_FETCH_ADD,
                _ => IBV_WC_SEND,
            },
            byte_len: if w.opcode == IBV_WR_RDMA_READ || is_atomic(w.opcode) {
                w.length as u32
            } else {
                0
            },
            qp_num: qpn,
            ..ibv_wc::default()
        }
    }

    /// Moves a QP to the error state: `first` (the WQE at the head of the send queue) completes
    /// with its status, then every outstanding work request is flushed.
    fn set_error(&mut self, qpn: u32, first: Option<u32>) {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return;
        };
        qp.state = IBV_QPS_ERR;
        qp.next_tx = 0;
        qp.resend_at = None;
        let (scq, rcq) = (qp.send_cq, qp.recv_cq);
        let sq: Vec<SendWqe> = qp.sq.drain(..).collect();
        let rq: Vec<RecvWqe> = qp.rq.drain(..).collect();
        for (i, w) in sq.iter().enumerate() {
            let status = match first {
                Some(s) if i == 0 => s,
                _ => IBV_WC_WR_FLUSH_ERR,
            };
            self.push_wc(scq, Self::send_wc(qpn, w, status));
        }
        for r in rq {
            self.push_wc(
                rcq,
                ibv_wc {
                    wr_id: r.wr_id,
                    status: IBV_WC_WR_FLUSH_ERR,
                    opcode: IBV_WC_RECV,
                    qp_num: qpn,
                    ..ibv_wc::default()
                },
            );
        }
    }

    /// Checks a local scatter/gather list against the registrations of `pd`; `write`: the device
    /// writes into it. `None` when an entry is not covered by a region with the rights.
    /// `rdma`: the buffers of an RDMA read or write, checked against the pages registered too.
    fn local_iov(
        &self,
        pd: u32,
        sges: &[ibv_sge],
        write: bool,
        rdma: bool,
    ) -> Option<Vec<(u64, u64)>> {
        sges.iter()
            .filter(|s| s.length > 0)
            .map(|s| {
                let mr = self.mrs.get(&s.lkey)?;
                let ok = mr.pd == pd
                    && if rdma {
                        mr.holds(s.addr, s.length as u64)
                    } else {
                        mr.covers(s.addr, s.length as u64)
                    }
                    && (!write || mr.access & IBV_ACCESS_LOCAL_WRITE != 0);
                ok.then_some((s.addr, s.length as u64))
            })
            .collect()
    }

    /// `ibv_post_send` for one work request.
    ///
    /// # Safety
    /// `wr`'s scatter/gather list is valid; with `IBV_SEND_INLINE` its buffers are readable.
    pub unsafe fn post_send(&mut self, qpn: u32, wr: &ibv_send_wr) -> Result<(), Errno> {
        let qp = self.qps.get(&qpn).ok_or(libc::EINVAL)?;
        match wr.opcode {
            IBV_WR_RDMA_WRITE
            | IBV_WR_RDMA_WRITE_WITH_IMM
            | IBV_WR_SEND
            | IBV_WR_SEND_WITH_IMM
            | IBV_WR_RDMA_READ
            | IBV_WR_ATOMIC_CMP_AND_SWP
            | IBV_WR_ATOMIC_FETCH_AND_ADD => {}
            _ => return Err(libc::EINVAL),
        }
        if wr.num_sge < 0 || wr.num_sge as u32 > qp.cap.max_send_sge {
            return Err(libc::EINVAL);
        }
        if qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_ERR {
            return Err(libc::EINVAL);
        }
        if qp.sq.len() >= qp.cap.max_send_wr as usize {
            return Err(libc::ENOMEM);
        }
        let sges: &[ibv_sge] = if wr.num_sge == 0 || wr.sg_list.is_null() {
            &[]
        } else {
            std::slice::from_raw_parts(wr.sg_list, wr.num_sge as usize)
        };
        let length: u64 = sges.iter().map(|s| s.length as u64).sum();
        let inline = wr.send_flags & IBV_SEND_INLINE != 0;
        let bytes_limit = self.bytes_limit as u64;
        let atomic = is_atomic(wr.opcode);
        if length > MAX_MSG
            || (inline
                && (wr.opcode == IBV_WR_RDMA_READ
                    || atomic
                    || length > qp.cap.max_inline_data as u64))
            || (atomic && (sges.len() != 1 || length != 8))
        {
            return Err(libc::EINVAL);
        }
        let mut failed = false;
        let data = if inline {
            let mut v = Vec::with_capacity(length as usize);
            for s in sges {
                v.extend_from_slice(std::slice::from_raw_parts(
                    s.addr as usize as *const u8,
                    s.length as usize,
                ));
            }
            Data::Bytes(v)
        } else {
            let rdma = atomic
                || matches!(
                    wr.opcode,
                    IBV_WR_RDMA_READ | IBV_WR_RDMA_WRITE | IBV_WR_RDMA_WRITE_WITH_IMM
                );
            let writes = wr.opcode == IBV_WR_RDMA_READ || atomic;
            match self.local_iov(qp.pd, sges, writes, rdma) {
                None => {
                    failed = true;
                    Data::Iov {
                        iov: Vec::new(),
                        by_ring: false,
                    }
                }
                Some(iov) => Data::Iov {
                    iov,
                    by_ring: matches!(wr.opcode, IBV_WR_SEND | IBV_WR_SEND_WITH_IMM)
                        && length <= bytes_limit,
                },
            }
        };
        let qp = self.qps.get_mut(&qpn).ok_or(libc::EINVAL)?;
        // SAFETY: every view of the union is plain data.
        let (rdma, at) = unsafe { (wr.wr.rdma, wr.wr.atomic) };
        let (remote_addr, rkey, operands) = if atomic {
            (at.remote_addr, at.rkey, (at.compare_add, at.swap))
        } else {
            (rdma.remote_addr, rdma.rkey, (0, 0))
        };
        let w = SendWqe {
            wr_id: wr.wr_id,
            opcode: wr.opcode,
            signaled: qp.sig_all || wr.send_flags & IBV_SEND_SIGNALED != 0,
            psn: qp.npsn,
            data,
            length,
            remote_addr,
            rkey,
            imm: matches!(wr.opcode, IBV_WR_SEND_WITH_IMM | IBV_WR_RDMA_WRITE_WITH_IMM)
                .then_some(wr.imm_data),
            operands,
            rnr_left: qp.rnr_retry,
        };
        qp.npsn = (qp.npsn + 1) & PSN_MASK;
        qp.sq.push_back(w);
        if qp.state == IBV_QPS_ERR {
            self.set_error(qpn, None);
        } else if failed {
            // A local protection error completes the work request and breaks the QP, as on an
            // adapter (the requests before it are flushed too: there is no partial progress).
            let status = IBV_WC_LOC_PROT_ERR;
            let qp = self.qps.get_mut(&qpn).ok_or(libc::EINVAL)?;
            let bad = qp.sq.pop_back();
            self.set_error(qpn, None);
            if let (Some(bad), Some(qp)) = (bad, self.qps.get(&qpn)) {
                let cq = qp.send_cq;
                self.push_wc(cq, Self::send_wc(qpn, &bad, status));
            }
        }
        Ok(())
    }

    /// `ibv_post_recv` for one work request.
    ///
    /// # Safety
    /// `wr`'s scatter/gather list is valid.
    pub unsafe fn post_recv(&mut self, qpn: u32, wr: &ibv_recv_wr) -> Result<(), Errno> {
        let qp = self.qps.get_mut(&qpn).ok_or(libc::EINVAL)?;
        if qp.srq.is_some() || qp.state == IBV_QPS_RESET {
            return Err(libc::EINVAL);
        }
        if wr.num_sge < 0 || wr.num_sge as u32 > qp.cap.max_recv_sge {
            return Err(libc::EINVAL);
        }
        if qp.rq.len() >= qp.cap.max_recv_wr as usize {
            return Err(libc::ENOMEM);
        }
        qp.rq.push_back(RecvWqe {
            wr_id: wr.wr_id,
            sges: sge_list(wr),
        });
        if qp.state == IBV_QPS_ERR {
            self.set_error(qpn, None);
        }
        Ok(())
    }

    /// `ibv_post_srq_recv` for one work request.
    ///
    /// # Safety
    /// `wr`'s scatter/gather list is valid.
    pub unsafe fn post_srq_recv(&mut self, srq: u32, wr: &ibv_recv_wr) -> Result<(), Errno> {
        let s = self.srqs.get_mut(&srq).ok_or(libc::EINVAL)?;
        if wr.num_sge < 0 || wr.num_sge as usize > s.max_sge {
            return Err(libc::EINVAL);
        }
        if s.wrs.len() >= s.cap {
            return Err(libc::ENOMEM);
        }
        s.wrs.push_back(RecvWqe {
            wr_id: wr.wr_id,
            sges: sge_list(wr),
        });
        Ok(())
    }

    /// Takes up to `out.len()` completions of a CQ (after making progress): their count, or
    /// `Err` once the CQ has overrun.
    pub fn poll_cq(&mut self, cq: u32, out: &mut [ibv_wc]) -> Result<usize, Errno> {
        self.progress();
        let cq = self.cqs.get_mut(&cq).ok_or(libc::EINVAL)?;
        if cq.overrun {
            return Err(libc::EOVERFLOW);
        }
        let n = out.len().min(cq.wcs.len());
        for (o, wc) in out.iter_mut().zip(cq.wcs.drain(..n)) {
            *o = wc;
        }
        Ok(n)
    }

    /// Everything the device would do meanwhile: inbound requests and responses, transmissions,
    /// timers.
    pub fn progress(&mut self) {
        self.flush_backlogs();
        for src in 1..self.geo.lids {
            // A bounded number per ring and call, so a busy peer cannot hold a poll forever.
            for _ in 0..256 {
                let Some((h, p)) = self.inbound[src].peek(&self.seg, src) else {
                    break;
                };
                match h.kind() {
                    kind::REQ => self.on_request(src as u16, &h, p),
                    kind::RESP => self.on_response(&h),
                    _ => {}
                }
                self.inbound[src].advance(&self.seg, src, &h);
            }
        }
        let qpns: Vec<u32> = self.qps.keys().copied().collect();
        let now = Instant::now();
        for qpn in qpns {
            self.watchdog(qpn, now);
            self.transmit(qpn);
        }
    }

    fn peer(&mut self, lid: u16) -> Option<&mut Peer> {
        if !self.peers.contains_key(&lid) {
            let seg = Segment::attach(&self.fabric, lid, self.geo).ok()??;
            let prod = Producer::attach(&seg, self.lid as usize);
            self.peers.insert(
                lid,
                Peer {
                    seg,
                    prod,
                    backlog: VecDeque::new(),
                },
            );
        }
        let peer = self.peers.get_mut(&lid)?;
        if peer.seg.owner_pid() <= 0 {
            return None;
        }
        Some(peer)
    }

    /// Drops the mapping of a peer whose process has gone (after a QP to it gave up), so a
    /// process that takes its LID later is reached through its own segment.
    fn forget_if_dead(&mut self, lid: u16) {
        if let Some(p) = self.peers.get(&lid) {
            // SAFETY: signal 0 only checks for existence.
            let gone = unsafe { libc::kill(p.seg.owner_pid(), 0) } != 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
            if gone {
                self.peers.remove(&lid);
            }
        }
    }

    fn flush_backlogs(&mut self) {
        let me = self.lid as usize;
        for peer in self.peers.values_mut() {
            while let Some(h) = peer.backlog.front() {
                if !peer.prod.push(&peer.seg, me, h, kind::RESP, 0, 0, |_| {}) {
                    break;
                }
                peer.backlog.pop_front();
            }
        }
    }

    fn respond(&mut self, lid: u16, req: &Pkt, syn: u32, aux: u32) {
        let me = self.lid as usize;
        let h = Pkt {
            src_qpn: req.dst_qpn,
            dst_qpn: req.src_qpn,
            psn: req.psn,
            op: syn,
            aux,
            ..Pkt::default()
        };
        let Some(peer) = self.peer(lid) else {
            return;
        };
        if !peer.backlog.is_empty() || !peer.prod.push(&peer.seg, me, &h, kind::RESP, 0, 0, |_| {})
        {
            peer.backlog.push_back(h);
        }
    }

    /// The responder: one request from LID `src`.
    fn on_request(&mut self, src: u16, h: &Pkt, payload: *const u8) {
        let ready = self.qps.get(&h.dst_qpn).is_some_and(|q| {
            (q.state == IBV_QPS_RTR || q.state == IBV_QPS_RTS)
                && q.dlid == src
                && q.dqpn == h.src_qpn
        });
        if !ready {
            self.respond(src, h, syndrome::NOT_READY, 0);
            return;
        }
        let Some(qp) = self.qps.get(&h.dst_qpn) else {
            return;
        };
        if h.psn != qp.epsn {
            // Sent after a request this QP did not carry out: the requester sends it again.
            return;
        }
        let (pd, access, srq, rcq, min_rnr) =
            (qp.pd, qp.access, qp.srq, qp.recv_cq, qp.min_rnr_timer);
        let Some(pid) = self.peer(src).map(|p| p.seg.owner_pid()) else {
            return;
        };
        if is_atomic(h.op) {
            self.on_atomic(src, h, payload, pid, pd, access);
            return;
        }
        // The request's data: bytes in the ring, or the requester's buffers.
        let n = h.payload();
        let bytes = h.flags() & flag::BYTES != 0;
        let remote: Vec<(u64, u64)> = if bytes {
            Vec::new()
        } else {
            // SAFETY: the payload lies inside the ring (Consumer::peek checked it).
            let raw = unsafe { std::slice::from_raw_parts(payload, n) };
            raw.chunks_exact(16)
                .map(|c| {
                    let a = u64::from_ne_bytes(c[..8].try_into().unwrap_or_default());
                    let l = u64::from_ne_bytes(c[8..].try_into().unwrap_or_default());
                    (a, l)
                })
                .collect()
        };
        let data_ok = if bytes {
            n as u64 == h.length
        } else {
            remote.iter().map(|r| r.1).sum::<u64>() == h.length
        };
        if !data_ok {
            self.respond(src, h, syndrome::REM_INV_REQ, 0);
            return;
        }
        let consumes_recv = matches!(
            h.op,
            IBV_WR_SEND | IBV_WR_SEND_WITH_IMM | IBV_WR_RDMA_WRITE_WITH_IMM
        );
        let recv = if consumes_recv {
            let taken = match srq {
                Some(s) => self.srqs.get_mut(&s).and_then(|s| s.wrs.pop_front()),
                None => self.qps.get_mut(&h.dst_qpn).and_then(|q| q.rq.pop_front()),
            };
            match taken {
                Some(r) => Some(r),
                None => {
                    self.respond(src, h, syndrome::RNR, min_rnr as u32);
                    return;
                }
            }
        } else {
            None
        };
        let recv_pd = srq.and_then(|s| self.srqs.get(&s)).map_or(pd, |s| s.pd);
        // Where the data goes (or, for a read, comes from) in this process.
        let local: Result<Vec<(u64, u64)>, u32> = match h.op {
            IBV_WR_SEND | IBV_WR_SEND_WITH_IMM => {
                let r = recv.as_ref().map(|r| r.sges.as_slice()).unwrap_or(&[]);
                match self.local_iov(recv_pd, r, true, false) {
                    None => Err(IBV_WC_LOC_PROT_ERR),
                    Some(iov) if iov.iter().map(|v| v.1).sum::<u64>() < h.length => {
                        Err(IBV_WC_LOC_LEN_ERR)
                    }
                    Some(iov) => Ok(iov),
                }
            }
            IBV_WR_RDMA_WRITE | IBV_WR_RDMA_WRITE_WITH_IMM | IBV_WR_RDMA_READ => {
                let need = if h.op == IBV_WR_RDMA_READ {
                    IBV_ACCESS_REMOTE_READ
                } else {
                    IBV_ACCESS_REMOTE_WRITE
                };
                let ok = self.mrs.get(&h.rkey).is_some_and(|mr| {
                    mr.pd == pd
                        && mr.access & need != 0
                        && access as i32 & need != 0
                        && mr.holds(h.remote_addr, h.length)
                });
                if ok {
                    Ok(vec![(h.remote_addr, h.length)])
                } else {
                    Err(IBV_WC_REM_ACCESS_ERR)
                }
            }
            _ => Err(IBV_WC_REM_INV_REQ_ERR),
        };
        let local = match local {
            Ok(l) => l,
            Err(IBV_WC_REM_ACCESS_ERR) => {
                // The responder's receive (if one was taken) stays posted.
                self.unpop_recv(h.dst_qpn, srq, recv);
                self.respond(src, h, syndrome::REM_ACCESS, 0);
                return;
            }
            Err(status) => {
                // A receive that cannot hold the message: the responder's QP breaks too.
                if let Some(r) = recv {
                    self.push_wc(rcq, recv_wc(h, &r, status, src));
                }
                let syn = if status == IBV_WC_LOC_LEN_ERR {
                    syndrome::REM_INV_REQ
                } else {
                    syndrome::REM_OP
                };
                self.respond(src, h, syn, 0);
                self.set_error(h.dst_qpn, None);
                return;
            }
        };
        let moved = if h.length == 0 {
            true
        } else if bytes {
            // SAFETY: the payload holds h.length bytes in the ring; `local` was checked against
            // this process's registrations.
            unsafe { scatter(payload, h.length as usize, &local) };
            true
        } else if h.op == IBV_WR_RDMA_READ {
            cma(pid, &local, &remote, true)
        } else {
            cma(pid, &local, &remote, false)
        };
        if !moved {
            self.unpop_recv(h.dst_qpn, srq, recv);
            self.respond(src, h, syndrome::REM_OP, 0);
            return;
        }
        if let Some(qp) = self.qps.get_mut(&h.dst_qpn) {
            qp.epsn = (qp.epsn + 1) & PSN_MASK;
        }
        if let Some(r) = recv {
            self.push_wc(rcq, recv_wc(h, &r, IBV_WC_SUCCESS, src));
        }
        self.respond(src, h, syndrome::ACK, 0);
    }

    /// The responder's side of an atomic from LID `src` (process `pid`) on a QP of protection
    /// domain `pd` with remote rights `access`: payload = the requester's buffer (address,
    /// length) and the operands (compare or add, swap).
    fn on_atomic(
        &mut self,
        src: u16,
        h: &Pkt,
        payload: *const u8,
        pid: libc::pid_t,
        pd: u32,
        access: u32,
    ) {
        let n = h.payload();
        if h.flags() & flag::BYTES != 0 || n != 32 || h.length != 8 {
            self.respond(src, h, syndrome::REM_INV_REQ, 0);
            return;
        }
        let mut w = [0u64; 4];
        for (i, v) in w.iter_mut().enumerate() {
            let mut b = [0u8; 8];
            // SAFETY: the payload's 32 bytes lie inside the ring (Consumer::peek checked it).
            unsafe { std::ptr::copy_nonoverlapping(payload.add(8 * i), b.as_mut_ptr(), 8) };
            *v = u64::from_ne_bytes(b);
        }
        let [dest, dest_len, compare_add, swap] = w;
        let need = IBV_ACCESS_REMOTE_ATOMIC;
        let ok = self.mrs.get(&h.rkey).is_some_and(|mr| {
            mr.pd == pd
                && mr.access & need != 0
                && access as i32 & need != 0
                && mr.holds(h.remote_addr, 8)
        });
        if !ok {
            self.respond(src, h, syndrome::REM_ACCESS, 0);
            return;
        }
        if h.remote_addr & 7 != 0 || dest_len != 8 {
            self.respond(src, h, syndrome::REM_INV_REQ, 0);
            return;
        }
        // SAFETY: the word lies in a live registration of this process with remote atomic
        // rights (checked above) and is 8-byte aligned; every access by the device is atomic.
        let word =
            unsafe { std::sync::atomic::AtomicU64::from_ptr(h.remote_addr as usize as *mut u64) };
        let sc = std::sync::atomic::Ordering::SeqCst;
        let old = if h.op == IBV_WR_ATOMIC_FETCH_AND_ADD {
            word.fetch_add(compare_add, sc)
        } else {
            match word.compare_exchange(compare_add, swap, sc, sc) {
                Ok(v) | Err(v) => v,
            }
        };
        let old = old.to_ne_bytes();
        if !cma(pid, &[(old.as_ptr() as u64, 8)], &[(dest, 8)], true) {
            // Applied, but the old value could not be returned: the requester's QP breaks.
            self.respond(src, h, syndrome::REM_OP, 0);
            return;
        }
        if let Some(qp) = self.qps.get_mut(&h.dst_qpn) {
            qp.epsn = (qp.epsn + 1) & PSN_MASK;
        }
        self.respond(src, h, syndrome::ACK, 0);
    }

    fn unpop_recv(&mut self, qpn: u32, srq: Option<u32>, recv: Option<RecvWqe>) {
        let Some(r) = recv else { return };
        match srq {
            Some(s) => {
                if let Some(s) = self.srqs.get_mut(&s) {
                    s.wrs.push_front(r);
                }
            }
            None => {
                if let Some(q) = self.qps.get_mut(&qpn) {
                    q.rq.push_front(r);
                }
            }
        }
    }

    /// The requester: the response to the WQE at the head of a send queue.
    fn on_response(&mut self, h: &Pkt) {
        let now = Instant::now();
        let Some(qp) = self.qps.get_mut(&h.dst_qpn) else {
            return;
        };
        if qp.state != IBV_QPS_RTS
            || qp.next_tx == 0
            || qp.sq.front().is_none_or(|w| w.psn != h.psn)
        {
            return;
        }
        qp.last_heard = now;
        let qpn = h.dst_qpn;
        match h.op {
            syndrome::ACK => {
                qp.retries_left = qp.retry_cnt;
                qp.next_tx -= 1;
                let cq = qp.send_cq;
                if let Some(w) = qp.sq.pop_front() {
                    if w.signaled {
                        self.push_wc(cq, Self::send_wc(qpn, &w, IBV_WC_SUCCESS));
                    }
                }
            }
            syndrome::RNR => {
                let infinite = qp.rnr_retry == 7;
                let Some(w) = qp.sq.front_mut() else { return };
                if !infinite && w.rnr_left == 0 {
                    self.set_error(qpn, Some(IBV_WC_RNR_RETRY_EXC_ERR));
                    return;
                }
                if !infinite {
                    w.rnr_left -= 1;
                }
                qp.next_tx = 0;
                let us = RNR_TIMER_US[(h.aux & 31) as usize];
                qp.resend_at = Some(now + Duration::from_micros(us as u64));
            }
            syndrome::NOT_READY => self.not_ready(qpn, now),
            syndrome::REM_ACCESS => self.set_error(qpn, Some(IBV_WC_REM_ACCESS_ERR)),
            syndrome::REM_INV_REQ => self.set_error(qpn, Some(IBV_WC_REM_INV_REQ_ERR)),
            _ => self.set_error(qpn, Some(IBV_WC_REM_OP_ERR)),
        }
    }

    /// The responder cannot take requests (or cannot be reached): retry after the ACK timeout,
    /// `retry_cnt` times.
    fn not_ready(&mut self, qpn: u32, now: Instant) {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return;
        };
        let timeout = ack_timeout(qp.timeout);
        if timeout.is_some() && qp.retries_left == 0 {
            let dlid = qp.dlid;
            self.set_error(qpn, Some(IBV_WC_RETRY_EXC_ERR));
            self.forget_if_dead(dlid);
            return;
        }
        if timeout.is_some() {
            qp.retries_left -= 1;
        }
        qp.next_tx = 0;
        qp.resend_at = Some(now + timeout.unwrap_or(Duration::from_millis(1)));
    }

    /// A requester that hears nothing for `timeout` × (`retry_cnt` + 1) gives up.
    fn watchdog(&mut self, qpn: u32, now: Instant) {
        let Some(qp) = self.qps.get(&qpn) else { return };
        if qp.state != IBV_QPS_RTS || qp.next_tx == 0 {
            return;
        }
        if let Some(t) = ack_timeout(qp.timeout) {
            if now.duration_since(qp.last_heard) > t * (qp.retry_cnt as u32 + 1) {
                let dlid = qp.dlid;
                self.set_error(qpn, Some(IBV_WC_RETRY_EXC_ERR));
                self.forget_if_dead(dlid);
            }
        }
    }

    /// Puts a QP's untransmitted WQEs on the wire, in order, while the ring takes them.
    fn transmit(&mut self, qpn: u32) {
        let me = self.lid as usize;
        let now = Instant::now();
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return;
        };
        if qp.state != IBV_QPS_RTS || qp.next_tx >= qp.sq.len() {
            return;
        }
        if qp.resend_at.is_some_and(|t| now < t) {
            return;
        }
        qp.resend_at = None;
        let (dlid, dqpn) = (qp.dlid, qp.dqpn);
        if !self.peers.contains_key(&dlid) && self.peer(dlid).is_none() {
            self.not_ready(qpn, now);
            return;
        }
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return;
        };
        let Some(peer) = self.peers.get_mut(&dlid) else {
            return;
        };
        if qp.next_tx == 0 {
            qp.last_heard = now;
        }
        while qp.next_tx < qp.sq.len() {
            let w = &qp.sq[qp.next_tx];
            let mut flags = 0;
            if w.imm.is_some() {
                flags |= flag::IMM;
            }
            let payload = match &w.data {
                Data::Bytes(b) => {
                    flags |= flag::BYTES;
                    b.len()
                }
                Data::Iov { by_ring: true, .. } => {
                    flags |= flag::BYTES;
                    w.length as usize
                }
                Data::Iov { iov, .. } => iov.len() * 16 + if is_atomic(w.opcode) { 16 } else { 0 },
            };
            let h = Pkt {
                src_qpn: qpn,
                dst_qpn: dqpn,
                psn: w.psn,
                op: w.opcode,
                remote_addr: w.remote_addr,
                rkey: w.rkey,
                imm: w.imm.unwrap_or(0),
                length: w.length,
                ..Pkt::default()
            };
            let pushed = peer
                .prod
                .push(&peer.seg, me, &h, kind::REQ, flags, payload, |d| {
                    // SAFETY: `d` has room for `payload` bytes (Producer::push).
                    unsafe {
                        match &w.data {
                            Data::Bytes(b) => std::ptr::copy_nonoverlapping(b.as_ptr(), d, b.len()),
                            // The user's registered buffers stay valid until the work request
                            // completes (the verbs contract): gathered now, and again if the
                            // request is sent again.
                            Data::Iov { iov, by_ring: true } => {
                                let mut at = d;
                                for &(a, l) in iov {
                                    std::ptr::copy_nonoverlapping(
                                        a as usize as *const u8,
                                        at,
                                        l as usize,
                                    );
                                    at = at.add(l as usize);
                                }
                            }
                            Data::Iov { iov, .. } => {
                                for (i, &(a, l)) in iov.iter().enumerate() {
                                    let at = d.add(16 * i);
                                    std::ptr::copy_nonoverlapping(a.to_ne_bytes().as_ptr(), at, 8);
                                    std::ptr::copy_nonoverlapping(
                                        l.to_ne_bytes().as_ptr(),
                                        at.add(8),
                                        8,
                                    );
                                }
                                if is_atomic(w.opcode) {
                                    let at = d.add(16 * iov.len());
                                    let (c, s) = w.operands;
                                    std::ptr::copy_nonoverlapping(c.to_ne_bytes().as_ptr(), at, 8);
                                    std::ptr::copy_nonoverlapping(
                                        s.to_ne_bytes().as_ptr(),
                                        at.add(8),
                                        8,
                                    );
                                }
                            }
                        }
                    }
                });
            if !pushed {
                break;
            }
            qp.next_tx += 1;
        }
    }
}

fn sge_list(wr: &ibv_recv_wr) -> Vec<ibv_sge> {
    if wr.num_sge <= 0 || wr.sg_list.is_null() {
        return Vec::new();
    }
    // SAFETY: the caller of the post call passes a valid list of num_sge entries.
    unsafe { std::slice::from_raw_parts(wr.sg_list, wr.num_sge as usize) }.to_vec()
}

fn recv_wc(h: &Pkt, r: &RecvWqe, status: u32, src: u16) -> ibv_wc {
    let imm = h.flags() & flag::IMM != 0;
    ibv_wc {
        wr_id: r.wr_id,
        status,
        opcode: if h.op == IBV_WR_RDMA_WRITE_WITH_IMM {
            IBV_WC_RECV_RDMA_WITH_IMM
        } else {
            IBV_WC_RECV
        },
        byte_len: h.length as u32,
        imm_data: if imm { h.imm } else { 0 },
        qp_num: h.dst_qpn,
        src_qp: h.src_qpn,
        wc_flags: if imm { IBV_WC_WITH_IMM } else { 0 },
        slid: src,
        ..ibv_wc::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(tag: &str) -> Device {
        Device::open(Config {
            fabric: format!("unit-{tag}-{}", std::process::id()),
            lid: None,
            geo: Geometry {
                lids: 4,
                ring_bytes: 16 << 10,
            },
        })
        .unwrap()
    }

    fn attr(state: u32) -> ibv_qp_attr {
        // SAFETY: plain data; all-zero is a valid value.
        let mut a: ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = state;
        a.port_num = 1;
        a.ah_attr.dlid = 1;
        a
    }

    const INIT: i32 = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    const RTR: i32 = IBV_QP_STATE
        | IBV_QP_AV
        | IBV_QP_PATH_MTU
        | IBV_QP_DEST_QPN
        | IBV_QP_RQ_PSN
        | IBV_QP_MAX_DEST_RD_ATOMIC
        | IBV_QP_MIN_RNR_TIMER;
    const RTS: i32 = IBV_QP_STATE
        | IBV_QP_SQ_PSN
        | IBV_QP_TIMEOUT
        | IBV_QP_RETRY_CNT
        | IBV_QP_RNR_RETRY
        | IBV_QP_MAX_QP_RD_ATOMIC;

    fn qp(d: &mut Device) -> (u32, u32) {
        let (cq, _) = d.create_cq(2).unwrap();
        let mut cap = ibv_qp_cap {
            max_send_wr: 4,
            max_recv_wr: 4,
            ..Default::default()
        };
        (d.create_qp(1, cq, cq, None, &mut cap, true).unwrap(), cq)
    }

    #[test]
    fn qp_state_machine_takes_only_rc_transitions_with_their_required_attributes() {
        let mut d = device("sm");
        let (q, _) = qp(&mut d);
        assert_eq!(d.modify_qp(q, &attr(IBV_QPS_RTR), RTR), Err(libc::EINVAL));
        assert_eq!(
            d.modify_qp(q, &attr(IBV_QPS_INIT), IBV_QP_STATE),
            Err(libc::EINVAL)
        );
        let mut bad_port = attr(IBV_QPS_INIT);
        bad_port.port_num = 2;
        assert_eq!(d.modify_qp(q, &bad_port, INIT), Err(libc::EINVAL));
        assert_eq!(d.modify_qp(q, &attr(IBV_QPS_INIT), INIT), Ok(IBV_QPS_INIT));
        // RTR with an attribute RTR does not take (SQ_PSN belongs to RTS).
        assert_eq!(
            d.modify_qp(q, &attr(IBV_QPS_RTR), RTR | IBV_QP_SQ_PSN),
            Err(libc::EINVAL)
        );
        let mut no_lid = attr(IBV_QPS_RTR);
        no_lid.ah_attr.dlid = 0;
        assert_eq!(d.modify_qp(q, &no_lid, RTR), Err(libc::EINVAL));
        assert_eq!(d.modify_qp(q, &attr(IBV_QPS_RTR), RTR), Ok(IBV_QPS_RTR));
        assert_eq!(d.modify_qp(q, &attr(IBV_QPS_RTS), RTS), Ok(IBV_QPS_RTS));
        assert_eq!(d.modify_qp(q, &attr(IBV_QPS_INIT), INIT), Err(libc::EINVAL));
        assert_eq!(
            d.modify_qp(q, &attr(IBV_QPS_ERR), IBV_QP_STATE),
            Ok(IBV_QPS_ERR)
        );
        assert_eq!(
            d.modify_qp(q, &attr(IBV_QPS_RESET), IBV_QP_STATE),
            Ok(IBV_QPS_RESET)
        );
        d.close();
    }

    #[test]
    fn posting_needs_a_ready_qp_and_a_full_cq_overruns() {
        let mut d = device("post");
        let (q, cq) = qp(&mut d);
        // SAFETY: plain data; all-zero is a valid value (no scatter/gather list).
        let swr: ibv_send_wr = unsafe { std::mem::zeroed() };
        let rwr = ibv_recv_wr {
            wr_id: 1,
            next: std::ptr::null_mut(),
            sg_list: std::ptr::null_mut(),
            num_sge: 0,
        };
        // SAFETY: the work requests carry no buffers.
        unsafe {
            assert_eq!(d.post_recv(q, &rwr), Err(libc::EINVAL));
            d.modify_qp(q, &attr(IBV_QPS_INIT), INIT).unwrap();
            assert_eq!(d.post_send(q, &swr), Err(libc::EINVAL));
            for _ in 0..3 {
                d.post_recv(q, &rwr).unwrap();
            }
        }
        // Three flushed receives into a CQ of two entries.
        d.modify_qp(q, &attr(IBV_QPS_ERR), IBV_QP_STATE).unwrap();
        let mut out = [ibv_wc::default(); 4];
        assert_eq!(d.poll_cq(cq, &mut out), Err(libc::EOVERFLOW));
        d.close();
    }
}
