//! The Rust API over the software device, in one process: two RC QPs connected to each other
//! through the port's own LID. Sends with immediate data, a 1 MiB RDMA write and read, and a bad
//! rkey, all through `ibv_post_send`/`ibv_poll_cq` as written in this crate (the context's
//! operation table).
#![cfg(not(verbs_vendor))]

use std::ptr;
use std::time::{Duration, Instant};

use verbs_sys::*;
// The software device provides the symbols unless rdma-core's libibverbs is linked.
#[cfg(not(verbs_vendor))]
use verbs_shmem as _;

struct Side {
    qp: *mut ibv_qp,
}

unsafe fn wait(cq: *mut ibv_cq) -> ibv_wc {
    let mut wc = ibv_wc::default();
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let n = ibv_poll_cq(cq, 1, &mut wc);
        assert!(n >= 0, "poll_cq: {n}");
        if n == 1 {
            return wc;
        }
        assert!(Instant::now() < end, "no completion within 10 s");
    }
}

unsafe fn connect(qp: *mut ibv_qp, lid: u16, dqpn: u32) {
    let mut a: ibv_qp_attr = std::mem::zeroed();
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ) as u32;
    let m = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    assert_eq!(ibv_modify_qp(qp, &mut a, m), 0);
    // INIT -> RTS skips RTR: refused.
    a.qp_state = IBV_QPS_RTS;
    assert_eq!(ibv_modify_qp(qp, &mut a, IBV_QP_STATE), libc::EINVAL);
    let mut a: ibv_qp_attr = std::mem::zeroed();
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = dqpn;
    a.rq_psn = 100;
    a.min_rnr_timer = 1;
    a.max_dest_rd_atomic = 1;
    a.ah_attr.dlid = lid;
    a.ah_attr.port_num = 1;
    let m = IBV_QP_STATE
        | IBV_QP_AV
        | IBV_QP_PATH_MTU
        | IBV_QP_DEST_QPN
        | IBV_QP_RQ_PSN
        | IBV_QP_MAX_DEST_RD_ATOMIC
        | IBV_QP_MIN_RNR_TIMER;
    assert_eq!(ibv_modify_qp(qp, &mut a, m), 0);
    let mut a: ibv_qp_attr = std::mem::zeroed();
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 100;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    let m = IBV_QP_STATE
        | IBV_QP_SQ_PSN
        | IBV_QP_TIMEOUT
        | IBV_QP_RETRY_CNT
        | IBV_QP_RNR_RETRY
        | IBV_QP_MAX_QP_RD_ATOMIC;
    assert_eq!(ibv_modify_qp(qp, &mut a, m), 0);
    assert_eq!((*qp).state, IBV_QPS_RTS);
}

unsafe fn send_wr(
    opcode: u32,
    sge: &mut ibv_sge,
    remote: u64,
    rkey: u32,
    imm: u32,
    id: u64,
) -> ibv_send_wr {
    let mut wr: ibv_send_wr = std::mem::zeroed();
    wr.wr_id = id;
    wr.sg_list = sge;
    wr.num_sge = 1;
    wr.opcode = opcode;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = imm.to_be();
    wr.wr.rdma = ibv_send_wr_rdma {
        remote_addr: remote,
        rkey,
    };
    wr
}

#[test]
fn two_queue_pairs_of_one_process_exchange_sends_and_rdma_through_the_operation_table() {
    std::env::set_var(
        "STORMPI_VERBS_FABRIC",
        format!("loopback-{}", std::process::id()),
    );
    unsafe {
        let mut n = 0;
        let list = ibv_get_device_list(&mut n);
        assert_eq!(n, 1);
        let ctx = ibv_open_device(*list);
        ibv_free_device_list(list);
        assert!(!ctx.is_null());
        let mut port = ibv_port_attr::default();
        assert_eq!(ibv_query_port(ctx, 1, &mut port), 0);
        assert_eq!(port.state, IBV_PORT_ACTIVE);
        let pd = ibv_alloc_pd(ctx);
        let cq = ibv_create_cq(ctx, 64, ptr::null_mut(), ptr::null_mut(), 0);
        const MB: usize = 1 << 20;
        let mut mem = vec![0u8; 4 * MB];
        let base = mem.as_mut_ptr();
        let access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
        let mr = ibv_reg_mr(pd, base.cast(), 4 * MB, access);
        assert!(!pd.is_null() && !cq.is_null() && !mr.is_null());
        // Memory that is not mapped cannot be registered.
        let hole = libc::mmap(
            ptr::null_mut(),
            8192,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(hole, libc::MAP_FAILED);
        assert_eq!(libc::munmap(hole.cast::<u8>().add(4096).cast(), 4096), 0);
        assert!(ibv_reg_mr(pd, hole, 8192, IBV_ACCESS_LOCAL_WRITE).is_null());
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EFAULT)
        );
        let first = ibv_reg_mr(pd, hole, 4096, IBV_ACCESS_LOCAL_WRITE);
        assert!(!first.is_null());
        assert_eq!(ibv_dereg_mr(first), 0);
        libc::munmap(hole, 4096);
        let sides: Vec<Side> = (0..2)
            .map(|_| {
                let mut init = ibv_qp_init_attr {
                    qp_context: ptr::null_mut(),
                    send_cq: cq,
                    recv_cq: cq,
                    srq: ptr::null_mut(),
                    cap: ibv_qp_cap {
                        max_send_wr: 16,
                        max_recv_wr: 16,
                        max_send_sge: 1,
                        max_recv_sge: 1,
                        max_inline_data: 64,
                    },
                    qp_type: IBV_QPT_RC,
                    sq_sig_all: 0,
                };
                Side {
                    qp: ibv_create_qp(pd, &mut init),
                }
            })
            .collect();
        let (a, b) = (sides[0].qp, sides[1].qp);
        connect(a, port.lid, (*b).qp_num);
        connect(b, port.lid, (*a).qp_num);

        // A send with immediate data from a to b.
        let mut rsge = ibv_sge {
            addr: base.add(MB) as u64,
            length: 4096,
            lkey: (*mr).lkey,
        };
        let mut rwr = ibv_recv_wr {
            wr_id: 7,
            next: ptr::null_mut(),
            sg_list: &mut rsge,
            num_sge: 1,
        };
        let mut bad_r = ptr::null_mut();
        assert_eq!(ibv_post_recv(b, &mut rwr, &mut bad_r), 0);
        std::slice::from_raw_parts_mut(base, 100).fill(0x3c);
        let mut sge = ibv_sge {
            addr: base as u64,
            length: 100,
            lkey: (*mr).lkey,
        };
        let mut wr = send_wr(IBV_WR_SEND_WITH_IMM, &mut sge, 0, 0, 0xabcd, 1);
        let mut bad = ptr::null_mut();
        assert_eq!(ibv_post_send(a, &mut wr, &mut bad), 0);
        let (w1, w2) = (wait(cq), wait(cq));
        let (s, r) = if w1.wr_id == 1 { (w1, w2) } else { (w2, w1) };
        assert_eq!((s.status, s.opcode), (IBV_WC_SUCCESS, IBV_WC_SEND));
        assert_eq!(
            (r.status, r.opcode, r.byte_len),
            (IBV_WC_SUCCESS, IBV_WC_RECV, 100)
        );
        assert_eq!(u32::from_be(r.imm_data), 0xabcd);
        assert_eq!(r.src_qp, (*a).qp_num);
        assert!(std::slice::from_raw_parts(base.add(MB), 100)
            .iter()
            .all(|&x| x == 0x3c));

        // 1 MiB RDMA write from [0, 1 MiB) to [2 MiB, 3 MiB), read back into [3 MiB, 4 MiB).
        for (i, x) in std::slice::from_raw_parts_mut(base, MB)
            .iter_mut()
            .enumerate()
        {
            *x = (i * 31 + (i >> 10)) as u8;
        }
        sge.length = MB as u32;
        let mut wr = send_wr(
            IBV_WR_RDMA_WRITE,
            &mut sge,
            base.add(2 * MB) as u64,
            (*mr).rkey,
            0,
            2,
        );
        assert_eq!(ibv_post_send(a, &mut wr, &mut bad), 0);
        let w = wait(cq);
        assert_eq!(
            (w.wr_id, w.status, w.opcode),
            (2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE)
        );
        let mut rd = ibv_sge {
            addr: base.add(3 * MB) as u64,
            length: MB as u32,
            lkey: (*mr).lkey,
        };
        let mut wr = send_wr(
            IBV_WR_RDMA_READ,
            &mut rd,
            base.add(2 * MB) as u64,
            (*mr).rkey,
            0,
            3,
        );
        assert_eq!(ibv_post_send(b, &mut wr, &mut bad), 0);
        let w = wait(cq);
        assert_eq!(
            (w.wr_id, w.status, w.byte_len),
            (3, IBV_WC_SUCCESS, MB as u32)
        );
        assert!(mem[..MB] == mem[2 * MB..3 * MB] && mem[..MB] == mem[3 * MB..]);

        // A bad rkey: remote access error, the QP goes to error and flushes the next request.
        let base = mem.as_mut_ptr();
        sge.addr = base as u64;
        sge.length = 8;
        let mut wr = send_wr(
            IBV_WR_RDMA_WRITE,
            &mut sge,
            base as u64,
            (*mr).rkey + 1,
            0,
            4,
        );
        assert_eq!(ibv_post_send(a, &mut wr, &mut bad), 0);
        let mut wr = send_wr(IBV_WR_SEND, &mut sge, 0, 0, 0, 5);
        assert_eq!(ibv_post_send(a, &mut wr, &mut bad), 0);
        let w = wait(cq);
        assert_eq!((w.wr_id, w.status), (4, IBV_WC_REM_ACCESS_ERR));
        let w = wait(cq);
        assert_eq!((w.wr_id, w.status), (5, IBV_WC_WR_FLUSH_ERR));
        // Atomics are accepted (the device's two-process `atomics` scenario checks them); one
        // to a QP in error is never answered, as on an adapter: retries exceeded.
        let mut wr = send_wr(IBV_WR_ATOMIC_FETCH_AND_ADD, &mut sge, 0, 0, 0, 6);
        assert_eq!(ibv_post_send(b, &mut wr, &mut bad), 0);
        let w = wait(cq);
        assert_eq!((w.wr_id, w.status), (6, IBV_WC_RETRY_EXC_ERR));

        for s in &sides {
            assert_eq!(ibv_destroy_qp(s.qp), 0);
        }
        assert_eq!(ibv_dereg_mr(mr), 0);
        assert_eq!(ibv_destroy_cq(cq), 0);
        assert_eq!(ibv_dealloc_pd(pd), 0);
        assert_eq!(ibv_close_device(ctx), 0);
    }
}
