/* Two-process checks of the software verbs device, written against rdma-core's
 * <infiniband/verbs.h> as any verbs program is, and linked against libverbs_shmem.a.
 *
 *   swverbs_check SCENARIO RANK DIR
 *
 * Both ranks open the device, create QP 0 (control) and the scenario's test QPs, write
 * "lid qpn psn rkey addr" lines to DIR/RANK.info and read the peer's, then connect every QP
 * (RESET -> INIT -> RTR -> RTS). Exit status 0 = every check passed; messages say what failed. */
#include <infiniband/verbs.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NQP 4
#define BUF (1 << 20)
#define CHECK(c, ...)                                                              \
    do {                                                                           \
        if (!(c)) {                                                                \
            fprintf(stderr, "rank %d: line %d: check failed: %s: ", rank, __LINE__, #c); \
            fprintf(stderr, __VA_ARGS__);                                          \
            fprintf(stderr, "\n");                                                 \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

static int rank;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_srq *srq;
static struct ibv_qp *qp[NQP];
static uint8_t *buf, *ctl;           /* buf: 2 MiB test memory; ctl: control messages */
static struct ibv_mr *mr, *ctl_mr, *extra_mr;
static struct { unsigned lid, qpn[NQP], psn[NQP], rkey, extra_rkey; unsigned long long addr, extra; } me, peer;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Waits for one completion on the CQ (10 s at most). */
static struct ibv_wc wait_wc(void) {
    struct ibv_wc wc;
    double end = now() + 10;
    for (;;) {
        int n = ibv_poll_cq(cq, 1, &wc);
        CHECK(n >= 0, "poll_cq returned %d", n);
        if (n == 1) return wc;
        CHECK(now() < end, "no completion within 10 s");
    }
}

/* Polls (so the responder side runs) for `s` seconds, expecting no completion. */
static void idle(double s) {
    struct ibv_wc wc;
    double end = now() + s;
    while (now() < end) CHECK(ibv_poll_cq(cq, 1, &wc) == 0, "unexpected completion wr_id %llu status %s",
                              (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
}

static void post_recv(struct ibv_qp *q, uint64_t id, void *addr, uint32_t len, uint32_t lkey) {
    struct ibv_sge sge = {(uintptr_t)addr, len, lkey};
    struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *bad;
    CHECK(ibv_post_recv(q, &wr, &bad) == 0, "post_recv");
}

static int post_send(struct ibv_qp *q, uint64_t id, enum ibv_wr_opcode op, void *addr, uint32_t len,
                     uint32_t lkey, unsigned flags, uint64_t raddr, uint32_t rkey, uint32_t imm) {
    struct ibv_sge sge = {(uintptr_t)addr, len, lkey};
    struct ibv_send_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = len ? 1 : 0, .opcode = op,
                             .send_flags = IBV_SEND_SIGNALED | flags, .imm_data = htobe32(imm)},
                       *bad;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    return ibv_post_send(q, &wr, &bad);
}

/* A control message on QP 0 (the peer has receives posted on ctl). */
static void ctl_send(uint32_t what) {
    CHECK(post_send(qp[0], 900, IBV_WR_SEND_WITH_IMM, NULL, 0, 0, 0, 0, 0, what) == 0, "ctl send");
    struct ibv_wc wc = wait_wc();
    CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 900, "ctl send completion %s", ibv_wc_status_str(wc.status));
}

static void ctl_recv(uint32_t what) {
    struct ibv_wc wc = wait_wc();
    CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && (wc.wc_flags & IBV_WC_WITH_IMM) &&
              be32toh(wc.imm_data) == what,
          "expected control %u, got wr_id %llu status %s opcode %d imm %u", what, (unsigned long long)wc.wr_id,
          ibv_wc_status_str(wc.status), wc.opcode, be32toh(wc.imm_data));
    post_recv(qp[0], 800, ctl, 64, ctl_mr->lkey);
}

static void exchange(const char *dir) {
    char path[512], tmp[512];
    snprintf(tmp, sizeof tmp, "%s/%d.tmp", dir, rank);
    snprintf(path, sizeof path, "%s/%d.info", dir, rank);
    FILE *f = fopen(tmp, "w");
    CHECK(f, "write %s", tmp);
    fprintf(f, "%u %u %llx %u %llx", me.lid, me.rkey, me.addr, me.extra_rkey, me.extra);
    for (int i = 0; i < NQP; i++) fprintf(f, " %u %u", me.qpn[i], me.psn[i]);
    fprintf(f, "\n");
    fclose(f);
    CHECK(rename(tmp, path) == 0, "rename");
    snprintf(path, sizeof path, "%s/%d.info", dir, 1 - rank);
    double end = now() + 10;
    while (!(f = fopen(path, "r"))) {
        CHECK(now() < end, "peer's %s did not appear", path);
        usleep(1000);
    }
    int n = fscanf(f, "%u %u %llx %u %llx", &peer.lid, &peer.rkey, &peer.addr, &peer.extra_rkey, &peer.extra);
    for (int i = 0; i < NQP; i++) n += fscanf(f, "%u %u", &peer.qpn[i], &peer.psn[i]);
    fclose(f);
    CHECK(n == 5 + 2 * NQP, "peer's info file is short");
}

/* QPs connected from now on let the peer run atomics on this process's memory. */
static int qp_atomic;

/* RESET -> INIT -> RTR -> RTS with the peer's QP number, LID and PSN. */
static void connect_qp(int i, uint8_t rnr_retry, uint8_t min_rnr_timer, uint8_t timeout, uint8_t retry_cnt) {
    struct ibv_qp_attr a = {0};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | (qp_atomic ? IBV_ACCESS_REMOTE_ATOMIC : 0);
    CHECK(ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0,
          "to INIT");
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = peer.qpn[i];
    a.rq_psn = peer.psn[i];
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = min_rnr_timer;
    a.ah_attr.dlid = peer.lid;
    a.ah_attr.port_num = 1;
    CHECK(ibv_modify_qp(qp[i], &a,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0,
          "to RTR");
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = me.psn[i];
    a.timeout = timeout;
    a.retry_cnt = retry_cnt;
    a.rnr_retry = rnr_retry;
    a.max_rd_atomic = 1;
    /* A transition without its required attributes is refused. */
    CHECK(ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == EINVAL, "RTS without TIMEOUT accepted");
    CHECK(ibv_modify_qp(qp[i], &a,
                        IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                            IBV_QP_MAX_QP_RD_ATOMIC) == 0,
          "to RTS");
    CHECK(qp[i]->state == IBV_QPS_RTS, "state field %d", qp[i]->state);
}

static void fill(uint8_t *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(i * 7 + seed + (i >> 12));
}
static size_t first_bad(const uint8_t *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != (uint8_t)(i * 7 + seed + (i >> 12))) return i;
    return n;
}

static void setup(const char *dir, int use_srq) {
    int n;
    struct ibv_device **list = ibv_get_device_list(&n);
    CHECK(list && n == 1, "device list");
    CHECK(strcmp(ibv_get_device_name(list[0]), "swverbs0") == 0, "device name %s", ibv_get_device_name(list[0]));
    ctx = ibv_open_device(list[0]);
    CHECK(ctx, "open_device: %s", strerror(errno));
    ibv_free_device_list(list);
    struct ibv_device_attr da;
    CHECK(ibv_query_device(ctx, &da) == 0 && da.phys_port_cnt == 1, "query_device");
    struct ibv_port_attr pa;
    CHECK(ibv_query_port(ctx, 1, &pa) == 0 && pa.state == IBV_PORT_ACTIVE && pa.lid != 0, "query_port");
    union ibv_gid gid;
    CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0 && gid.raw[0] == 0xfe, "query_gid");
    me.lid = pa.lid;
    pd = ibv_alloc_pd(ctx);
    CHECK(pd, "alloc_pd");
    cq = ibv_create_cq(ctx, 4096, NULL, NULL, 0);
    CHECK(cq, "create_cq");
    buf = aligned_alloc(4096, 2 * BUF);
    ctl = aligned_alloc(4096, 4096);
    memset(buf, 0, 2 * BUF);
    mr = ibv_reg_mr(pd, buf, 2 * BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    ctl_mr = ibv_reg_mr(pd, ctl, 4096, IBV_ACCESS_LOCAL_WRITE);
    extra_mr = ibv_reg_mr(pd, buf + BUF, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    CHECK(mr && ctl_mr && extra_mr, "reg_mr");
    CHECK(ibv_reg_mr(pd, buf, 64, IBV_ACCESS_REMOTE_WRITE) == NULL, "REMOTE_WRITE without LOCAL_WRITE accepted");
    me.rkey = mr->rkey;
    me.addr = (uintptr_t)buf;
    me.extra_rkey = extra_mr->rkey;
    me.extra = (uintptr_t)(buf + BUF);
    if (use_srq) {
        struct ibv_srq_init_attr sa = {.attr = {.max_wr = 4, .max_sge = 1}};
        srq = ibv_create_srq(pd, &sa);
        CHECK(srq, "create_srq");
    }
    for (int i = 0; i < NQP; i++) {
        struct ibv_qp_init_attr qa = {.send_cq = cq, .recv_cq = cq, .srq = (i == 3) ? srq : NULL,
                                      .cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 2,
                                              .max_recv_sge = 2, .max_inline_data = 256},
                                      .qp_type = IBV_QPT_RC};
        qp[i] = ibv_create_qp(pd, &qa);
        CHECK(qp[i], "create_qp: %s", strerror(errno));
        me.qpn[i] = qp[i]->qp_num;
        me.psn[i] = (unsigned)(rand() ^ (getpid() << 4)) & 0xffffff;
    }
    exchange(dir);
    /* The control QP retries forever on RNR and waits long for an answer; test QPs use timeout 16
     * (0.27 s; 2 s of silence with retry_cnt 7), so a loaded machine does not look like a dead
     * peer. */
    connect_qp(0, 7, 1, 18, 7);
    for (int i = 0; i < 2; i++) post_recv(qp[0], 800, ctl, 64, ctl_mr->lkey);
}

/* Ping-pong of inline sends with immediate data, then a 200 KiB send (one copy between the
 * processes) and a two-element gather/scatter send. */
static void pingpong(void) {
    connect_qp(1, 7, 1, 16, 7);
    uint8_t *rx = buf, *tx = buf + BUF;
    const int rounds = 1000;
    /* Each side keeps one receive posted ahead: the next is posted before the answer is sent. */
    post_recv(qp[1], 1000, rx, 4096, mr->lkey);
    for (int i = 0; i < rounds; i++) {
        if (rank == 0) {
            memset(tx, i & 0xff, 64);
            CHECK(post_send(qp[1], i, IBV_WR_SEND_WITH_IMM, tx, 64, 0, IBV_SEND_INLINE, 0, 0, i) == 0, "send");
            memset(tx, 0xee, 64); /* inline: the buffer is ours again at once */
        }
        int got_send = 0, got_recv = 0;
        while (!(got_recv && got_send)) {
            struct ibv_wc wc = wait_wc();
            CHECK(wc.status == IBV_WC_SUCCESS, "round %d: %s", i, ibv_wc_status_str(wc.status));
            if (wc.opcode == IBV_WC_RECV) {
                CHECK(wc.byte_len == 64 && be32toh(wc.imm_data) == (uint32_t)i && wc.src_qp == peer.qpn[1] &&
                          wc.slid == peer.lid && wc.qp_num == qp[1]->qp_num && wc.wr_id == (uint64_t)(1000 + i),
                      "round %d: recv len %u imm %u", i, wc.byte_len, be32toh(wc.imm_data));
                for (int k = 0; k < 64; k++) CHECK(rx[k] == (i & 0xff), "round %d byte %d", i, k);
                got_recv = 1;
                if (i + 1 < rounds) post_recv(qp[1], 1000 + i + 1, rx, 4096, mr->lkey);
                if (rank == 1) {
                    memcpy(tx, rx, 64);
                    CHECK(post_send(qp[1], i, IBV_WR_SEND_WITH_IMM, tx, 64, mr->lkey, 0, 0, 0, i) == 0, "echo");
                }
            } else {
                CHECK(wc.opcode == IBV_WC_SEND && wc.wr_id == (uint64_t)i, "send completion");
                got_send = 1;
            }
        }
    }
    /* A large send: the receiver copies it straight out of the sender's buffer. */
    size_t big = 200 << 10;
    if (rank == 1) {
        post_recv(qp[1], 77, rx, BUF, mr->lkey);
        ctl_send(1);
        struct ibv_wc wc = wait_wc();
        CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 77 && wc.byte_len == big, "big recv %s len %u",
              ibv_wc_status_str(wc.status), wc.byte_len);
        CHECK(first_bad(rx, big, 3) == big, "big send byte %zu", first_bad(rx, big, 3));
        /* Gather/scatter: two receive elements take one message of two gathered pieces. */
        struct ibv_sge s[2] = {{(uintptr_t)rx, 100, mr->lkey}, {(uintptr_t)(rx + 5000), 5000, mr->lkey}};
        struct ibv_recv_wr w = {.wr_id = 78, .sg_list = s, .num_sge = 2}, *bad;
        CHECK(ibv_post_recv(qp[1], &w, &bad) == 0, "post sg recv");
        ctl_send(2);
        wc = wait_wc();
        CHECK(wc.status == IBV_WC_SUCCESS && wc.byte_len == 3000, "sg recv %s", ibv_wc_status_str(wc.status));
        for (int k = 0; k < 3000; k++) CHECK((k < 100 ? rx[k] : rx[5000 + k - 100]) == (uint8_t)(k * 13), "sg byte %d", k);
    } else {
        ctl_recv(1);
        fill(tx, big, 3);
        CHECK(post_send(qp[1], 79, IBV_WR_SEND, tx, big, mr->lkey, 0, 0, 0, 0) == 0, "big send");
        struct ibv_wc wc = wait_wc();
        CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 79, "big send completion %s", ibv_wc_status_str(wc.status));
        ctl_recv(2);
        for (int k = 0; k < 3000; k++) tx[k] = (uint8_t)(k * 13);
        struct ibv_sge s[2] = {{(uintptr_t)tx, 1000, mr->lkey}, {(uintptr_t)(tx + 1000), 2000, mr->lkey}};
        struct ibv_send_wr w = {.wr_id = 80, .sg_list = s, .num_sge = 2, .opcode = IBV_WR_SEND,
                                .send_flags = IBV_SEND_SIGNALED}, *bad;
        CHECK(ibv_post_send(qp[1], &w, &bad) == 0, "post sg send");
        wc = wait_wc();
        CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 80, "sg send %s", ibv_wc_status_str(wc.status));
    }
}

/* RDMA write of 1 MiB, announced by a write with immediate data; RDMA read of 1 MiB back. */
static void rdma(void) {
    connect_qp(1, 7, 1, 16, 7);
    if (rank == 0) {
        fill(buf, BUF, 11);
        CHECK(post_send(qp[1], 1, IBV_WR_RDMA_WRITE, buf, BUF, mr->lkey, 0, peer.addr, peer.rkey, 0) == 0, "write");
        /* Zero bytes written with immediate data: consumes the peer's receive, after the write. */
        CHECK(post_send(qp[1], 2, IBV_WR_RDMA_WRITE_WITH_IMM, NULL, 0, 0, 0, peer.addr, peer.rkey, 42) == 0, "imm");
        struct ibv_wc a = wait_wc(), b = wait_wc();
        CHECK(a.status == IBV_WC_SUCCESS && a.wr_id == 1 && a.opcode == IBV_WC_RDMA_WRITE, "write completion %s",
              ibv_wc_status_str(a.status));
        CHECK(b.status == IBV_WC_SUCCESS && b.wr_id == 2, "imm completion %s", ibv_wc_status_str(b.status));
        fill(buf + BUF, BUF, 29); /* what the peer reads */
        ctl_send(1);
        ctl_recv(2); /* polls (the read's responder side runs here) until the peer has read */
    } else {
        post_recv(qp[1], 5, NULL, 0, 0);
        struct ibv_wc wc = wait_wc();
        CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && be32toh(wc.imm_data) == 42,
              "write-with-imm completion %s opcode %d", ibv_wc_status_str(wc.status), wc.opcode);
        CHECK(first_bad(buf, BUF, 11) == BUF, "written byte %zu differs", first_bad(buf, BUF, 11));
        ctl_recv(1);
        memset(buf, 0, BUF);
        CHECK(post_send(qp[1], 3, IBV_WR_RDMA_READ, buf, BUF, mr->lkey, 0, peer.addr + BUF, peer.rkey, 0) == 0,
              "read");
        wc = wait_wc();
        CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_READ && wc.byte_len == BUF,
              "read completion %s", ibv_wc_status_str(wc.status));
        CHECK(first_bad(buf, BUF, 29) == BUF, "read byte %zu differs", first_bad(buf, BUF, 29));
        ctl_send(2);
    }
}

static struct ibv_wc expect(uint64_t id, enum ibv_wc_status st) {
    struct ibv_wc wc = wait_wc();
    CHECK(wc.wr_id == id && wc.status == st, "expected wr %llu %s, got wr %llu %s", (unsigned long long)id,
          ibv_wc_status_str(st), (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
    return wc;
}

/* Bad rkey, out of bounds, a region without the right, a deregistered region: each completes with
 * IBV_WC_REM_ACCESS_ERR, moves the QP to error and flushes what follows; the memory is untouched. */
static void badkey(void) {
    for (int i = 1; i < 4; i++) connect_qp(i, 7, 1, 16, 7);
    if (rank == 0) {
        fill(buf, 8192, 5);
        ctl_recv(1); /* the peer has deregistered its extra region */
        CHECK(post_send(qp[1], 10, IBV_WR_RDMA_WRITE, buf, 64, mr->lkey, 0, peer.addr, peer.rkey ^ 0x5a5a00, 0) == 0,
              "post");
        CHECK(post_send(qp[1], 11, IBV_WR_SEND, buf, 8, mr->lkey, 0, 0, 0, 0) == 0, "post");
        expect(10, IBV_WC_REM_ACCESS_ERR);
        expect(11, IBV_WC_WR_FLUSH_ERR);
        /* Posting to a QP in error flushes at once. */
        CHECK(post_send(qp[1], 12, IBV_WR_SEND, buf, 8, mr->lkey, 0, 0, 0, 0) == 0, "post in error");
        expect(12, IBV_WC_WR_FLUSH_ERR);
        /* One byte past the end of the peer's 2 MiB region. */
        CHECK(post_send(qp[2], 20, IBV_WR_RDMA_READ, buf, 64, mr->lkey, 0, peer.addr + 2 * BUF - 63, peer.rkey, 0) ==
                  0, "post");
        expect(20, IBV_WC_REM_ACCESS_ERR);
        /* The peer's extra region was deregistered after its key was exchanged. */
        CHECK(post_send(qp[3], 30, IBV_WR_RDMA_WRITE, buf, 64, mr->lkey, 0, peer.extra, peer.extra_rkey, 0) == 0,
              "post");
        expect(30, IBV_WC_REM_ACCESS_ERR);
        /* A QP in error may go back to RESET. */
        CHECK(ibv_modify_qp(qp[1], &(struct ibv_qp_attr){.qp_state = IBV_QPS_RESET}, IBV_QP_STATE) == 0, "reset");
        ctl_send(2);
    } else {
        CHECK(ibv_dereg_mr(extra_mr) == 0, "dereg");
        ctl_send(1);
        ctl_recv(2);
        for (size_t k = 0; k < 2 * BUF; k++) CHECK(buf[k] == 0, "byte %zu of the target was written", k);
    }
}

/* A verbs atomic on the peer's word at `raddr`, the old value into buf[0..8). */
static int post_atomic(struct ibv_qp *q, uint64_t id, enum ibv_wr_opcode op, uint64_t raddr, uint32_t rkey,
                       uint64_t compare_add, uint64_t swap) {
    struct ibv_sge sge = {(uintptr_t)buf, 8, mr->lkey};
    struct ibv_send_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = op,
                             .send_flags = IBV_SEND_SIGNALED},
                       *bad;
    wr.wr.atomic.remote_addr = raddr;
    wr.wr.atomic.compare_add = compare_add;
    wr.wr.atomic.swap = swap;
    wr.wr.atomic.rkey = rkey;
    return ibv_post_send(q, &wr, &bad);
}

/* Fetch-and-add and compare-and-swap on the peer's 8-byte word (old values returned, applied by
 * the peer's CPU atomics: the device reports IBV_ATOMIC_GLOB); a misaligned word completes with
 * IBV_WC_REM_INV_REQ_ERR, a QP or a region without IBV_ACCESS_REMOTE_ATOMIC with
 * IBV_WC_REM_ACCESS_ERR, and the word is left as the successful ones made it. */
static void atomics(void) {
    struct ibv_device_attr da;
    CHECK(ibv_query_device(ctx, &da) == 0 && da.atomic_cap == IBV_ATOMIC_GLOB, "atomic_cap %d", da.atomic_cap);
    qp_atomic = 1;
    connect_qp(1, 7, 1, 16, 7);
    connect_qp(3, 7, 1, 16, 7);
    qp_atomic = 0;
    connect_qp(2, 7, 1, 16, 7);
    uint64_t *word = (uint64_t *)(buf + 8192);
    if (rank == 1) {
        *word = 40;
        struct ibv_mr *am = ibv_reg_mr(pd, buf + 8192, 4096,
                                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
        CHECK(am, "reg_mr with remote atomic");
        ctl_send(am->rkey);
        ctl_recv(3); /* polls: the atomics' responder side runs here */
        CHECK(*word == 7, "the word is %llu, want 7", (unsigned long long)*word);
        CHECK(ibv_dereg_mr(am) == 0, "dereg");
        ctl_send(4);
    } else {
        struct ibv_wc wc = wait_wc();
        CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && (wc.wc_flags & IBV_WC_WITH_IMM),
              "the peer's rkey");
        uint32_t rkey = be32toh(wc.imm_data);
        post_recv(qp[0], 800, ctl, 64, ctl_mr->lkey);
        uint64_t at = peer.addr + 8192, *old = (uint64_t *)buf;
        CHECK(post_atomic(qp[1], 1, IBV_WR_ATOMIC_FETCH_AND_ADD, at, rkey, 2, 0) == 0, "post");
        wc = expect(1, IBV_WC_SUCCESS);
        CHECK(wc.opcode == IBV_WC_FETCH_ADD && wc.byte_len == 8 && *old == 40, "fetch-add: opcode %d old %llu",
              wc.opcode, (unsigned long long)*old);
        CHECK(post_atomic(qp[1], 2, IBV_WR_ATOMIC_CMP_AND_SWP, at, rkey, 42, 7) == 0, "post");
        wc = expect(2, IBV_WC_SUCCESS);
        CHECK(wc.opcode == IBV_WC_COMP_SWAP && *old == 42, "compare-and-swap: old %llu", (unsigned long long)*old);
        CHECK(post_atomic(qp[1], 3, IBV_WR_ATOMIC_CMP_AND_SWP, at, rkey, 42, 9) == 0, "post");
        expect(3, IBV_WC_SUCCESS);
        CHECK(*old == 7, "a failed compare-and-swap returns the word: %llu", (unsigned long long)*old);
        /* Not on the atomics' 8-byte grid. */
        CHECK(post_atomic(qp[1], 4, IBV_WR_ATOMIC_FETCH_AND_ADD, at + 4, rkey, 1, 0) == 0, "post");
        expect(4, IBV_WC_REM_INV_REQ_ERR);
        /* The peer's QP 2 has no remote atomic right. */
        CHECK(post_atomic(qp[2], 5, IBV_WR_ATOMIC_FETCH_AND_ADD, at, rkey, 1, 0) == 0, "post");
        expect(5, IBV_WC_REM_ACCESS_ERR);
        /* The peer's main region has none either. */
        CHECK(post_atomic(qp[3], 6, IBV_WR_ATOMIC_FETCH_AND_ADD, peer.addr, peer.rkey, 1, 0) == 0, "post");
        expect(6, IBV_WC_REM_ACCESS_ERR);
        /* An atomic carries 8 bytes exactly. */
        struct ibv_sge sge = {(uintptr_t)buf, 4, mr->lkey};
        struct ibv_send_wr wr = {.wr_id = 7, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD},
                           *bad;
        CHECK(ibv_post_send(qp[1], &wr, &bad) == EINVAL, "a 4-byte atomic accepted");
        ctl_send(3);
        ctl_recv(4);
    }
}

/* Receiver not ready: rnr_retry 2 runs out (IBV_WC_RNR_RETRY_EXC_ERR); rnr_retry 7 waits until
 * a receive is posted; a shared receive queue of 4 refuses a fifth receive, and its senders wait
 * (RNR) when it is empty, in order. */
static void rnr(void) {
    connect_qp(1, 2, 1, 16, 7);
    connect_qp(2, 7, 1, 16, 7);
    connect_qp(3, 7, 1, 16, 7);
    if (rank == 0) {
        uint8_t *tx = buf;
        CHECK(post_send(qp[1], 1, IBV_WR_SEND, tx, 16, mr->lkey, 0, 0, 0, 0) == 0, "post");
        CHECK(post_send(qp[1], 2, IBV_WR_SEND, tx, 16, mr->lkey, 0, 0, 0, 0) == 0, "post");
        expect(1, IBV_WC_RNR_RETRY_EXC_ERR);
        expect(2, IBV_WC_WR_FLUSH_ERR);
        /* rnr_retry 7: the send waits while the peer has no receive posted ... */
        CHECK(post_send(qp[2], 3, IBV_WR_SEND, tx, 16, mr->lkey, 0, 0, 0, 0) == 0, "post");
        idle(0.05);
        /* ... and completes once the peer, told now, has posted one. */
        ctl_send(3);
        expect(3, IBV_WC_SUCCESS);
        for (int i = 0; i < 6; i++) {
            memset(tx + 64 * i, 'a' + i, 64);
            CHECK(post_send(qp[3], 40 + i, IBV_WR_SEND, tx + 64 * i, 64, mr->lkey, 0, 0, 0, 0) == 0, "post");
        }
        for (int i = 0; i < 6; i++) expect(40 + i, IBV_WC_SUCCESS);
        ctl_recv(1);
    } else {
        /* The SRQ is filled before the peer sends on it: a fifth receive is refused. */
        struct ibv_sge sge = {(uintptr_t)buf, 64, mr->lkey};
        struct ibv_recv_wr w = {.sg_list = &sge, .num_sge = 1}, *bad;
        for (int i = 0; i < 4; i++) {
            w.wr_id = 200 + i;
            sge.addr = (uintptr_t)(buf + 4096 + 64 * i);
            CHECK(ibv_post_srq_recv(srq, &w, &bad) == 0, "srq post %d", i);
        }
        CHECK(ibv_post_srq_recv(srq, &w, &bad) == ENOMEM && bad == &w, "a full SRQ took a fifth receive");
        ctl_recv(3);
        post_recv(qp[2], 100, buf, 64, mr->lkey);
        struct ibv_wc wc = expect(100, IBV_WC_SUCCESS);
        CHECK(wc.byte_len == 16, "len");
        int got = 0;
        while (got < 6) {
            wc = wait_wc();
            CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)(200 + got % 4) && wc.qp_num == qp[3]->qp_num,
                  "srq recv %d: wr %llu %s", got, (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
            uint8_t *at = buf + 4096 + 64 * (got % 4);
            CHECK(at[0] == 'a' + got && at[63] == 'a' + got, "srq message %d out of order ('%c')", got, at[0]);
            got++;
            if (got == 4) {
                idle(0.02); /* the SRQ is empty: the sender waits */
                for (int i = 0; i < 2; i++) {
                    w.wr_id = 200 + i;
                    sge.addr = (uintptr_t)(buf + 4096 + 64 * i);
                    CHECK(ibv_post_srq_recv(srq, &w, &bad) == 0, "srq repost");
                }
            }
        }
        ctl_send(1);
    }
}

/* A QP moved to error flushes its posted receives and sends; the peer, whose requests find it in
 * error, retries retry_cnt times and completes with IBV_WC_RETRY_EXC_ERR. */
static void flush(void) {
    connect_qp(1, 7, 1, 10, 2);
    if (rank == 0) {
        post_recv(qp[1], 1, buf, 64, mr->lkey);
        post_recv(qp[1], 2, buf, 64, mr->lkey);
        struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
        CHECK(ibv_modify_qp(qp[1], &a, IBV_QP_STATE) == 0, "to ERR");
        CHECK(qp[1]->state == IBV_QPS_ERR, "state");
        expect(1, IBV_WC_WR_FLUSH_ERR);
        expect(2, IBV_WC_WR_FLUSH_ERR);
        ctl_send(1);
        ctl_recv(2);
    } else {
        ctl_recv(1);
        double t0 = now();
        CHECK(post_send(qp[1], 7, IBV_WR_SEND, buf, 16, mr->lkey, 0, 0, 0, 0) == 0, "post");
        CHECK(post_send(qp[1], 8, IBV_WR_RDMA_WRITE, buf, 16, mr->lkey, 0, peer.addr, peer.rkey, 0) == 0, "post");
        expect(7, IBV_WC_RETRY_EXC_ERR);
        expect(8, IBV_WC_WR_FLUSH_ERR);
        /* timeout 10 is 4.2 ms: three tries take at least two of them */
        CHECK(now() - t0 > 0.008, "gave up after %.4f s", now() - t0);
        ctl_send(2);
    }
}

/* A burst of 60 sends of 4000 bytes, all posted at once: more than a small ring holds, so the
 * requester waits for room and nothing is lost or reordered. */
static void burst(void) {
    connect_qp(1, 7, 1, 16, 7);
    const int n = 60, len = 4000;
    if (rank == 1) {
        for (int i = 0; i < n; i++) post_recv(qp[1], 100 + i, buf + 4096 * i, 4096, mr->lkey);
        ctl_send(1);
        for (int i = 0; i < n; i++) {
            struct ibv_wc wc = expect(100 + i, IBV_WC_SUCCESS);
            CHECK(wc.byte_len == (uint32_t)len, "len %u", wc.byte_len);
            CHECK(first_bad(buf + 4096 * i, len, i) == (size_t)len, "message %d byte %zu", i,
                  first_bad(buf + 4096 * i, len, i));
        }
        ctl_send(2);
    } else {
        ctl_recv(1);
        for (int i = 0; i < n; i++) {
            fill(buf + 4096 * i, len, i);
            CHECK(post_send(qp[1], i, IBV_WR_SEND, buf + 4096 * i, len, mr->lkey, 0, 0, 0, 0) == 0, "post %d", i);
        }
        for (int i = 0; i < n; i++) expect(i, IBV_WC_SUCCESS);
        ctl_recv(2);
    }
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s pingpong|rdma|badkey|rnr|flush|burst RANK DIR\n", argv[0]);
        return 2;
    }
    rank = atoi(argv[2]);
    srand(getpid());
    const char *s = argv[1];
    setup(argv[3], strcmp(s, "rnr") == 0);
    if (!strcmp(s, "pingpong")) pingpong();
    else if (!strcmp(s, "rdma")) rdma();
    else if (!strcmp(s, "badkey")) badkey();
    else if (!strcmp(s, "rnr")) rnr();
    else if (!strcmp(s, "flush")) flush();
    else if (!strcmp(s, "burst")) burst();
    else if (!strcmp(s, "atomics")) atomics();
    else CHECK(0, "unknown scenario %s", s);
    /* Let the peer's last request be answered before the device goes away. */
    idle(0.05);
    for (int i = 0; i < NQP; i++) CHECK(ibv_destroy_qp(qp[i]) == 0, "destroy_qp");
    if (srq) CHECK(ibv_destroy_srq(srq) == 0, "destroy_srq");
    CHECK(ibv_destroy_cq(cq) == 0, "destroy_cq");
    CHECK(ibv_dereg_mr(mr) == 0 && ibv_dereg_mr(ctl_mr) == 0, "dereg");
    if (strcmp(s, "badkey") || rank == 0) CHECK(ibv_dereg_mr(extra_mr) == 0, "dereg");
    CHECK(ibv_dealloc_pd(pd) == 0, "dealloc_pd");
    CHECK(ibv_close_device(ctx) == 0, "close");
    printf("rank %d: %s passed\n", rank, s);
    return 0;
}
