//! Connection set-up through the modex: each process creates one reliable-connected queue pair
//! per job peer before the fence and publishes a [`Card`] (its port's LID and GID, the first
//! packet sequence number, where peers write returned credits) and its queue pair numbers
//! ([`QPNS_PER_KEY`] to a modex entry, indexed by peer rank). After the fence each side reads
//! the peer's card and the QPN the peer made for it and takes its own QP through
//! INIT → RTR → RTS. Both sides do this on their own: no connection messages.

use core::ptr;

use stormpi_core::rte::MAX_MODEX_VALUE;
use verbs_sys::*;

use crate::device::Device;
use crate::library::Library;

/// Modex key of the card.
pub const CARD_KEY: &str = "btl.verbs.card";
/// Queue pair numbers per modex entry (`btl.verbs.qpn.<n>`), within a modex value's size.
pub const QPNS_PER_KEY: usize = MAX_MODEX_VALUE / 4;

/// The modex key of the entry with peer `rank`'s QPN.
pub fn qpn_key(rank: u32) -> String {
    format!("btl.verbs.qpn.{}", rank as usize / QPNS_PER_KEY)
}

/// A process's business card.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Card {
    pub lid: u16,
    pub link_layer: u8,
    /// `IBV_MTU_*` of the port: a connection uses the smaller of the two.
    pub mtu: u8,
    pub gid: [u8; 16],
    /// First packet sequence number of every QP of this process.
    pub psn: u32,
    /// Address and rkey of this process's credit mailbox: a `u64` per peer rank, written by
    /// that peer with RDMA write.
    pub mailbox: u64,
    pub mailbox_rkey: u32,
}

impl Card {
    /// Encoded length.
    pub const LEN: usize = 2 + 1 + 1 + 16 + 4 + 8 + 4;

    /// Wire form (little-endian).
    pub fn to_bytes(&self) -> [u8; Card::LEN] {
        let mut b = [0u8; Card::LEN];
        b[0..2].copy_from_slice(&self.lid.to_le_bytes());
        b[2] = self.link_layer;
        b[3] = self.mtu;
        b[4..20].copy_from_slice(&self.gid);
        b[20..24].copy_from_slice(&self.psn.to_le_bytes());
        b[24..32].copy_from_slice(&self.mailbox.to_le_bytes());
        b[32..36].copy_from_slice(&self.mailbox_rkey.to_le_bytes());
        b
    }

    /// Parses a card; `None` when the length is wrong.
    pub fn from_bytes(b: &[u8]) -> Option<Card> {
        if b.len() != Card::LEN {
            return None;
        }
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[4..20]);
        Some(Card {
            lid: u16::from_le_bytes([b[0], b[1]]),
            link_layer: b[2],
            mtu: b[3],
            gid,
            psn: u32::from_le_bytes(b[20..24].try_into().ok()?),
            mailbox: u64::from_le_bytes(b[24..32].try_into().ok()?),
            mailbox_rkey: u32::from_le_bytes(b[32..36].try_into().ok()?),
        })
    }
}

/// Sizes of each queue pair's send queue.
#[derive(Clone, Copy, Debug)]
pub struct QpSizes {
    pub send_wr: u32,
    pub inline: u32,
}

/// Retransmission settings of a queue pair (`btl_verbs_timeout`, `btl_verbs_retry_count`).
#[derive(Clone, Copy, Debug)]
pub struct Retry {
    pub timeout: u8,
    pub count: u8,
}

/// Creates an RC queue pair on the device's CQ and SRQ; the inline size granted.
pub(crate) fn create_qp(
    lib: &Library,
    dev: &Device,
    sizes: QpSizes,
) -> Result<(*mut ibv_qp, u32), String> {
    create_qp_on(lib, dev, dev.cq, dev.srq, sizes)
}

/// Creates an RC queue pair on completion queue `cq` and shared receive queue `srq` (null: a
/// receive queue of its own, of one entry, never posted to); the inline size granted.
pub(crate) fn create_qp_on(
    lib: &Library,
    dev: &Device,
    cq: *mut ibv_cq,
    srq: *mut ibv_srq,
    sizes: QpSizes,
) -> Result<(*mut ibv_qp, u32), String> {
    let mut init = ibv_qp_init_attr {
        qp_context: ptr::null_mut(),
        send_cq: cq,
        recv_cq: cq,
        srq,
        cap: ibv_qp_cap {
            max_send_wr: sizes.send_wr,
            max_recv_wr: u32::from(srq.is_null()),
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: sizes.inline,
        },
        qp_type: IBV_QPT_RC,
        sq_sig_all: 1,
    };
    // SAFETY: PD, CQ and SRQ are live; `init` is valid.
    let mut qp = unsafe { (lib.create_qp)(dev.pd, &mut init) };
    if qp.is_null() && sizes.inline > 0 {
        // A device without inline sends: ask again for none.
        init.cap.max_inline_data = 0;
        // SAFETY: as above.
        qp = unsafe { (lib.create_qp)(dev.pd, &mut init) };
    }
    if qp.is_null() {
        return Err(format!(
            "ibv_create_qp on {} failed (send queue {}): lower btl_verbs_send_slots or btl_verbs_max_gets",
            dev.name, sizes.send_wr
        ));
    }
    Ok((qp, init.cap.max_inline_data))
}

/// Takes `qp` from RESET to RTS towards the peer with `card` whose QP for us is `dest_qpn`;
/// `psn` is our own first sequence number; `atomic`: the peer may run atomics on our memory
/// through it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn connect(
    lib: &Library,
    dev: &Device,
    qp: *mut ibv_qp,
    card: &Card,
    dest_qpn: u32,
    psn: u32,
    retry: Retry,
    atomic: bool,
) -> Result<(), String> {
    // SAFETY: all-zero is a valid ibv_qp_attr (a plain C struct).
    let mut a: ibv_qp_attr = unsafe { core::mem::zeroed() };
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = dev.port;
    a.qp_access_flags = IBV_ACCESS_REMOTE_READ as u32 | IBV_ACCESS_REMOTE_WRITE as u32;
    if atomic {
        a.qp_access_flags |= IBV_ACCESS_REMOTE_ATOMIC as u32;
    }
    step(
        lib,
        qp,
        &mut a,
        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
        "INIT",
    )?;
    // SAFETY: as above.
    let mut a: ibv_qp_attr = unsafe { core::mem::zeroed() };
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = dev.mtu.min(u32::from(card.mtu)).max(1);
    a.dest_qp_num = dest_qpn;
    a.rq_psn = card.psn;
    a.max_dest_rd_atomic = dev.max_rd_atomic;
    a.min_rnr_timer = 12;
    a.ah_attr.dlid = card.lid;
    a.ah_attr.port_num = dev.port;
    if card.link_layer == IBV_LINK_LAYER_ETHERNET || card.lid == 0 {
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = ibv_gid { raw: card.gid };
        a.ah_attr.grh.sgid_index = dev.gid_index;
        a.ah_attr.grh.hop_limit = 64;
    }
    step(
        lib,
        qp,
        &mut a,
        IBV_QP_STATE
            | IBV_QP_AV
            | IBV_QP_PATH_MTU
            | IBV_QP_DEST_QPN
            | IBV_QP_RQ_PSN
            | IBV_QP_MAX_DEST_RD_ATOMIC
            | IBV_QP_MIN_RNR_TIMER,
        "RTR",
    )?;
    // SAFETY: as above.
    let mut a: ibv_qp_attr = unsafe { core::mem::zeroed() };
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = psn;
    a.timeout = retry.timeout;
    a.retry_cnt = retry.count;
    // 7: retry forever on receiver-not-ready; credits keep it from happening.
    a.rnr_retry = 7;
    a.max_rd_atomic = dev.max_rd_atomic;
    step(
        lib,
        qp,
        &mut a,
        IBV_QP_STATE
            | IBV_QP_SQ_PSN
            | IBV_QP_TIMEOUT
            | IBV_QP_RETRY_CNT
            | IBV_QP_RNR_RETRY
            | IBV_QP_MAX_QP_RD_ATOMIC,
        "RTS",
    )
}

fn step(
    lib: &Library,
    qp: *mut ibv_qp,
    a: &mut ibv_qp_attr,
    mask: core::ffi::c_int,
    to: &str,
) -> Result<(), String> {
    // SAFETY: a live QP and a valid attribute block.
    let rc = unsafe { (lib.modify_qp)(qp, a, mask) };
    if rc != 0 {
        return Err(format!("ibv_modify_qp to {to} failed (errno {rc})"));
    }
    Ok(())
}

/// Moves `qp` to the error state: what is outstanding on it completes with a flush status.
pub(crate) fn to_error(lib: &Library, qp: *mut ibv_qp) {
    // SAFETY: as above.
    let mut a: ibv_qp_attr = unsafe { core::mem::zeroed() };
    a.qp_state = IBV_QPS_ERR;
    // SAFETY: a live QP.
    unsafe { (lib.modify_qp)(qp, &mut a, IBV_QP_STATE) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_card_survives_its_wire_form() {
        let c = Card {
            lid: 7,
            link_layer: IBV_LINK_LAYER_ETHERNET,
            mtu: 5,
            gid: [3; 16],
            psn: 0x12_3456,
            mailbox: 0x7fff_0000_1234,
            mailbox_rkey: 0xdead_beef,
        };
        assert_eq!(Card::from_bytes(&c.to_bytes()), Some(c));
        assert_eq!(Card::from_bytes(&c.to_bytes()[1..]), None);
    }

    #[test]
    fn qpn_entries_fit_a_modex_value() {
        const { assert!(QPNS_PER_KEY * 4 <= MAX_MODEX_VALUE) };
        assert_eq!(qpn_key(0), qpn_key(QPNS_PER_KEY as u32 - 1));
        assert_ne!(qpn_key(0), qpn_key(QPNS_PER_KEY as u32));
    }
}
