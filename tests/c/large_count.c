/*
 * large_count.c - every MPI-4 large-count (_c) function outside one-sided, I/O and spawn, at
 * small sizes, against its int twin.
 *
 * Point-to-point: Send_c/Recv_c, Isend_c/Irecv_c, Ssend_c, Issend_c, Rsend_c, Irsend_c, Bsend_c
 * and Ibsend_c with Buffer_attach_c/detach_c, Sendrecv_c, Sendrecv_replace_c, Mprobe + Mrecv_c,
 * Improbe + Imrecv_c, the persistent _init_c forms, Get_count_c/Get_elements_c.  Every
 * collective's _c form (blocking, non-blocking, persistent) gives the same bytes as its int form.
 * Datatype constructors' _c forms make types of the same size, extent, true extent and type map
 * as their int forms; Get_envelope_c/get_contents_c; Pack_c/Unpack_c/Pack_size_c and the
 * external32 forms give the same bytes; Op_create_c's function sees an MPI_Count length;
 * Reduce_local_c.  A status whose count does not fit an int: MPI_Get_count says MPI_UNDEFINED,
 * MPI_Get_count_c the count.  A type whose count does not fit an int (MPI_Type_contiguous_c of
 * 2^31 + 2^21 - 2 bytes) lists it as a large count in Get_envelope_c/Get_contents_c, and the int
 * queries refuse it with MPI_ERR_COUNT (mpi4py's testContiguousBigMPI).  The Fortran 90 types
 * (MPI_Type_create_f90_*) say MPI_COMBINER_F90_* with their arguments, are the same handle
 * each time, move data as their kind and cannot be freed.
 */
#include "stormtest.h"

#include <string.h>

#define N 7

static int rank, size;

static int val(int r, int i) { return r * 1000 + i * 7 + 3; }

static void fill(int *b, int n, int r)
{
    for (int i = 0; i < n; i++)
        b[i] = val(r, i);
}

static void check_ints(const int *a, const int *b, int n, const char *what)
{
    for (int i = 0; i < n; i++)
        CHECK(a[i] == b[i], "%s: element %d is %d, the int form gave %d", what, i, a[i], b[i]);
}

static void p2p(void)
{
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int sb[N], rb[N];
    MPI_Status st;
    MPI_Count c = -1;
    MPI_Request rq[2];

    fill(sb, N, rank);
    /* Send_c / Recv_c and the counts of its status. */
    memset(rb, 0, sizeof rb);
    CHECK_MPI(MPI_Sendrecv_c(sb, N, MPI_INT, right, 1, rb, N, MPI_INT, left, 1, MPI_COMM_WORLD, &st));
    for (int i = 0; i < N; i++)
        CHECK(rb[i] == val(left, i), "Sendrecv_c: got %d at %d", rb[i], i);
    CHECK_MPI(MPI_Get_count_c(&st, MPI_INT, &c));
    CHECK(c == N, "Get_count_c gave %lld", (long long)c);
    CHECK_MPI(MPI_Get_elements_c(&st, MPI_INT, &c));
    CHECK(c == N, "Get_elements_c gave %lld", (long long)c);

    if (rank % 2 == 0) {
        CHECK_MPI(MPI_Send_c(sb, N, MPI_INT, right, 2, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Recv_c(rb, N, MPI_INT, left, 2, MPI_COMM_WORLD, &st));
    } else {
        CHECK_MPI(MPI_Recv_c(rb, N, MPI_INT, left, 2, MPI_COMM_WORLD, &st));
        CHECK_MPI(MPI_Send_c(sb, N, MPI_INT, right, 2, MPI_COMM_WORLD));
    }
    for (int i = 0; i < N; i++)
        CHECK(rb[i] == val(left, i), "Send_c/Recv_c: got %d at %d", rb[i], i);

    /* Each non-blocking send mode, then the blocking synchronous and ready ones. */
    for (int mode = 0; mode < 4; mode++) {
        memset(rb, 0, sizeof rb);
        CHECK_MPI(MPI_Irecv_c(rb, N, MPI_INT, left, 10 + mode, MPI_COMM_WORLD, &rq[0]));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* ready sends find the receive posted */
        switch (mode) {
        case 0: CHECK_MPI(MPI_Isend_c(sb, N, MPI_INT, right, 10, MPI_COMM_WORLD, &rq[1])); break;
        case 1: CHECK_MPI(MPI_Issend_c(sb, N, MPI_INT, right, 11, MPI_COMM_WORLD, &rq[1])); break;
        case 2: CHECK_MPI(MPI_Irsend_c(sb, N, MPI_INT, right, 12, MPI_COMM_WORLD, &rq[1])); break;
        default: CHECK_MPI(MPI_Rsend_c(sb, N, MPI_INT, right, 13, MPI_COMM_WORLD)); rq[1] = MPI_REQUEST_NULL; break;
        }
        CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        for (int i = 0; i < N; i++)
            CHECK(rb[i] == val(left, i), "send mode %d: got %d at %d", mode, rb[i], i);
    }
    if (rank % 2 == 0) {
        CHECK_MPI(MPI_Ssend_c(sb, N, MPI_INT, right, 14, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Recv_c(rb, N, MPI_INT, left, 14, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    } else {
        CHECK_MPI(MPI_Recv_c(rb, N, MPI_INT, left, 14, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Ssend_c(sb, N, MPI_INT, right, 14, MPI_COMM_WORLD));
    }

    /* Buffered sends through a buffer attached with the _c form. */
    {
        MPI_Count bsize = 2 * (N * sizeof(int) + MPI_BSEND_OVERHEAD), got = 0;
        char *bbuf = test_malloc((size_t)bsize);
        void *back = NULL;
        CHECK_MPI(MPI_Buffer_attach_c(bbuf, bsize));
        CHECK_MPI(MPI_Bsend_c(sb, N, MPI_INT, right, 20, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Ibsend_c(sb, N, MPI_INT, right, 21, MPI_COMM_WORLD, &rq[0]));
        CHECK_MPI(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
        for (int t = 20; t <= 21; t++) {
            CHECK_MPI(MPI_Recv(rb, N, MPI_INT, left, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            for (int i = 0; i < N; i++)
                CHECK(rb[i] == val(left, i), "buffered send %d: got %d at %d", t, rb[i], i);
        }
        CHECK_MPI(MPI_Buffer_detach_c(&back, &got));
        CHECK(back == bbuf && got == bsize, "Buffer_detach_c gave %p %lld", back, (long long)got);
        free(bbuf);
    }

    /* Sendrecv_replace_c. */
    fill(rb, N, rank);
    CHECK_MPI(MPI_Sendrecv_replace_c(rb, N, MPI_INT, right, 30, left, 30, MPI_COMM_WORLD, &st));
    for (int i = 0; i < N; i++)
        CHECK(rb[i] == val(left, i), "Sendrecv_replace_c: got %d at %d", rb[i], i);

    /* Matched probes received with Mrecv_c and Imrecv_c. */
    for (int k = 0; k < 2; k++) {
        MPI_Message m;
        int flag = 0;
        CHECK_MPI(MPI_Isend(sb, N, MPI_INT, right, 40 + k, MPI_COMM_WORLD, &rq[1]));
        memset(rb, 0, sizeof rb);
        if (k == 0) {
            CHECK_MPI(MPI_Mprobe(left, 40, MPI_COMM_WORLD, &m, &st));
            CHECK_MPI(MPI_Mrecv_c(rb, N, MPI_INT, &m, &st));
        } else {
            while (!flag)
                CHECK_MPI(MPI_Improbe(left, 41, MPI_COMM_WORLD, &flag, &m, &st));
            CHECK_MPI(MPI_Imrecv_c(rb, N, MPI_INT, &m, &rq[0]));
            CHECK_MPI(MPI_Wait(&rq[0], &st));
        }
        CHECK_MPI(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Get_count_c(&st, MPI_INT, &c));
        CHECK(c == N, "matched receive %d: count %lld", k, (long long)c);
        for (int i = 0; i < N; i++)
            CHECK(rb[i] == val(left, i), "matched receive %d: got %d at %d", k, rb[i], i);
    }

    /* Persistent _init_c forms, started twice each. */
    for (int mode = 0; mode < 3; mode++) {
        CHECK_MPI(MPI_Recv_init_c(rb, N, MPI_INT, left, 50, MPI_COMM_WORLD, &rq[0]));
        switch (mode) {
        case 0: CHECK_MPI(MPI_Send_init_c(sb, N, MPI_INT, right, 50, MPI_COMM_WORLD, &rq[1])); break;
        case 1: CHECK_MPI(MPI_Ssend_init_c(sb, N, MPI_INT, right, 50, MPI_COMM_WORLD, &rq[1])); break;
        default: CHECK_MPI(MPI_Rsend_init_c(sb, N, MPI_INT, right, 50, MPI_COMM_WORLD, &rq[1])); break;
        }
        for (int it = 0; it < 2; it++) {
            fill(sb, N, rank + it);
            memset(rb, 0, sizeof rb);
            CHECK_MPI(MPI_Start(&rq[0]));
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            CHECK_MPI(MPI_Start(&rq[1]));
            CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
            for (int i = 0; i < N; i++)
                CHECK(rb[i] == val(left + it, i), "persistent mode %d start %d: got %d at %d", mode, it, rb[i], i);
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        }
        CHECK_MPI(MPI_Request_free(&rq[0]));
        CHECK_MPI(MPI_Request_free(&rq[1]));
    }
    {
        MPI_Count bsize = N * sizeof(int) + MPI_BSEND_OVERHEAD, got;
        char *bbuf = test_malloc((size_t)bsize);
        void *back;
        fill(sb, N, rank);
        CHECK_MPI(MPI_Buffer_attach_c(bbuf, bsize));
        CHECK_MPI(MPI_Bsend_init_c(sb, N, MPI_INT, right, 51, MPI_COMM_WORLD, &rq[1]));
        CHECK_MPI(MPI_Start(&rq[1]));
        CHECK_MPI(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Recv_c(rb, N, MPI_INT, left, 51, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int i = 0; i < N; i++)
            CHECK(rb[i] == val(left, i), "Bsend_init_c: got %d at %d", rb[i], i);
        CHECK_MPI(MPI_Request_free(&rq[1]));
        CHECK_MPI(MPI_Buffer_detach_c(&back, &got));
        free(bbuf);
    }
}

/* ---- collectives ---------------------------------------------------------------------------- */

/* Buffers of one collective call, int form and _c form side by side. */
#define CAP 4096
static int sbuf[CAP], r_int[CAP], r_c[CAP];
static int icounts[64], idispls[64], iwdispls[64];
static MPI_Count ccounts[64];
static MPI_Aint cdispls[64], cwdispls[64];
static MPI_Datatype types[64];

static void vsetup(int blocks)
{
    int at = 0;
    for (int i = 0; i < blocks; i++) {
        icounts[i] = (i * 3 + rank) % 4 + 1;
        idispls[i] = at + 1; /* a hole before each block */
        at += icounts[i] + 1;
        ccounts[i] = icounts[i];
        cdispls[i] = idispls[i];
        iwdispls[i] = idispls[i] * (int)sizeof(int);
        cwdispls[i] = iwdispls[i];
        types[i] = MPI_INT;
    }
}

/* The counts every rank uses must agree: v-collectives here use counts that depend on the
 * receiver (gatherv root, alltoallv pair) only through a formula every rank evaluates. */
static int cnt(int from, int to) { return (from * 3 + to) % 4 + 1; }

static void run_kind(int kind, int nb);

static void start_and_wait(MPI_Request *r, int nb)
{
    if (nb)
        CHECK_MPI(MPI_Wait(r, MPI_STATUS_IGNORE));
}

static void reset(void)
{
    fill(sbuf, CAP, rank);
    for (int i = 0; i < CAP; i++)
        r_int[i] = r_c[i] = -1;
}

static void colls(void)
{
    for (int nb = 0; nb < 2; nb++)
        for (int kind = 0; kind < 16; kind++) {
            reset();
            run_kind(kind, nb);
            check_ints(r_c, r_int, CAP, "collective _c form");
        }
}

static void run_kind(int kind, int nb)
{
    MPI_Request r = MPI_REQUEST_NULL;
    int root = size - 1;
    MPI_Comm w = MPI_COMM_WORLD;
    switch (kind) {
    case 0:
        memcpy(r_int, sbuf, N * sizeof(int));
        memcpy(r_c, sbuf, N * sizeof(int));
        CHECK_MPI(MPI_Bcast(r_int, N, MPI_INT, root, w));
        if (nb) CHECK_MPI(MPI_Ibcast_c(r_c, N, MPI_INT, root, w, &r));
        else CHECK_MPI(MPI_Bcast_c(r_c, N, MPI_INT, root, w));
        break;
    case 1:
        CHECK_MPI(MPI_Gather(sbuf, N, MPI_INT, r_int, N, MPI_INT, root, w));
        if (nb) CHECK_MPI(MPI_Igather_c(sbuf, N, MPI_INT, r_c, N, MPI_INT, root, w, &r));
        else CHECK_MPI(MPI_Gather_c(sbuf, N, MPI_INT, r_c, N, MPI_INT, root, w));
        break;
    case 2: {
        int at = 0;
        for (int i = 0; i < size; i++) {
            icounts[i] = cnt(i, root);
            ccounts[i] = icounts[i];
            idispls[i] = at + 1;
            cdispls[i] = idispls[i];
            at += icounts[i] + 1;
        }
        CHECK_MPI(MPI_Gatherv(sbuf, cnt(rank, root), MPI_INT, r_int, icounts, idispls, MPI_INT, root, w));
        if (nb) CHECK_MPI(MPI_Igatherv_c(sbuf, cnt(rank, root), MPI_INT, r_c, ccounts, cdispls, MPI_INT, root, w, &r));
        else CHECK_MPI(MPI_Gatherv_c(sbuf, cnt(rank, root), MPI_INT, r_c, ccounts, cdispls, MPI_INT, root, w));
        break;
    }
    case 3:
        CHECK_MPI(MPI_Scatter(sbuf, N, MPI_INT, r_int, N, MPI_INT, root, w));
        if (nb) CHECK_MPI(MPI_Iscatter_c(sbuf, N, MPI_INT, r_c, N, MPI_INT, root, w, &r));
        else CHECK_MPI(MPI_Scatter_c(sbuf, N, MPI_INT, r_c, N, MPI_INT, root, w));
        break;
    case 4: {
        int at = 0;
        for (int i = 0; i < size; i++) {
            icounts[i] = cnt(root, i);
            ccounts[i] = icounts[i];
            idispls[i] = at + 2;
            cdispls[i] = idispls[i];
            at += icounts[i] + 2;
        }
        CHECK_MPI(MPI_Scatterv(sbuf, icounts, idispls, MPI_INT, r_int, cnt(root, rank), MPI_INT, root, w));
        if (nb) CHECK_MPI(MPI_Iscatterv_c(sbuf, ccounts, cdispls, MPI_INT, r_c, cnt(root, rank), MPI_INT, root, w, &r));
        else CHECK_MPI(MPI_Scatterv_c(sbuf, ccounts, cdispls, MPI_INT, r_c, cnt(root, rank), MPI_INT, root, w));
        break;
    }
    case 5:
        CHECK_MPI(MPI_Allgather(sbuf, N, MPI_INT, r_int, N, MPI_INT, w));
        if (nb) CHECK_MPI(MPI_Iallgather_c(sbuf, N, MPI_INT, r_c, N, MPI_INT, w, &r));
        else CHECK_MPI(MPI_Allgather_c(sbuf, N, MPI_INT, r_c, N, MPI_INT, w));
        break;
    case 6: {
        int at = 0;
        for (int i = 0; i < size; i++) {
            icounts[i] = cnt(i, 0);
            ccounts[i] = icounts[i];
            idispls[i] = at + 1;
            cdispls[i] = idispls[i];
            at += icounts[i] + 1;
        }
        CHECK_MPI(MPI_Allgatherv(sbuf, cnt(rank, 0), MPI_INT, r_int, icounts, idispls, MPI_INT, w));
        if (nb) CHECK_MPI(MPI_Iallgatherv_c(sbuf, cnt(rank, 0), MPI_INT, r_c, ccounts, cdispls, MPI_INT, w, &r));
        else CHECK_MPI(MPI_Allgatherv_c(sbuf, cnt(rank, 0), MPI_INT, r_c, ccounts, cdispls, MPI_INT, w));
        break;
    }
    case 7:
        CHECK_MPI(MPI_Alltoall(sbuf, N, MPI_INT, r_int, N, MPI_INT, w));
        if (nb) CHECK_MPI(MPI_Ialltoall_c(sbuf, N, MPI_INT, r_c, N, MPI_INT, w, &r));
        else CHECK_MPI(MPI_Alltoall_c(sbuf, N, MPI_INT, r_c, N, MPI_INT, w));
        break;
    case 8:
    case 9: {
        static int sc[64], sd[64], rc[64], rd[64], swd[64], rwd[64];
        static MPI_Count csc[64], crc[64];
        static MPI_Aint csd[64], crd[64], cswd[64], crwd[64];
        int sat = 0, rat = 0;
        for (int i = 0; i < size; i++) {
            sc[i] = cnt(rank, i); rc[i] = cnt(i, rank);
            sd[i] = sat + 1; rd[i] = rat + 1;
            sat += sc[i] + 1; rat += rc[i] + 1;
            csc[i] = sc[i]; crc[i] = rc[i]; csd[i] = sd[i]; crd[i] = rd[i];
            swd[i] = sd[i] * 4; rwd[i] = rd[i] * 4; cswd[i] = swd[i]; crwd[i] = rwd[i];
        }
        if (kind == 8) {
            CHECK_MPI(MPI_Alltoallv(sbuf, sc, sd, MPI_INT, r_int, rc, rd, MPI_INT, w));
            if (nb) CHECK_MPI(MPI_Ialltoallv_c(sbuf, csc, csd, MPI_INT, r_c, crc, crd, MPI_INT, w, &r));
            else CHECK_MPI(MPI_Alltoallv_c(sbuf, csc, csd, MPI_INT, r_c, crc, crd, MPI_INT, w));
        } else {
            CHECK_MPI(MPI_Alltoallw(sbuf, sc, swd, types, r_int, rc, rwd, types, w));
            if (nb) CHECK_MPI(MPI_Ialltoallw_c(sbuf, csc, cswd, types, r_c, crc, crwd, types, w, &r));
            else CHECK_MPI(MPI_Alltoallw_c(sbuf, csc, cswd, types, r_c, crc, crwd, types, w));
        }
        break;
    }
    case 10:
        CHECK_MPI(MPI_Reduce(sbuf, r_int, N, MPI_INT, MPI_SUM, root, w));
        if (nb) CHECK_MPI(MPI_Ireduce_c(sbuf, r_c, N, MPI_INT, MPI_SUM, root, w, &r));
        else CHECK_MPI(MPI_Reduce_c(sbuf, r_c, N, MPI_INT, MPI_SUM, root, w));
        break;
    case 11:
        CHECK_MPI(MPI_Allreduce(sbuf, r_int, N, MPI_INT, MPI_MAX, w));
        if (nb) CHECK_MPI(MPI_Iallreduce_c(sbuf, r_c, N, MPI_INT, MPI_MAX, w, &r));
        else CHECK_MPI(MPI_Allreduce_c(sbuf, r_c, N, MPI_INT, MPI_MAX, w));
        break;
    case 12:
        CHECK_MPI(MPI_Reduce_scatter_block(sbuf, r_int, N, MPI_INT, MPI_SUM, w));
        if (nb) CHECK_MPI(MPI_Ireduce_scatter_block_c(sbuf, r_c, N, MPI_INT, MPI_SUM, w, &r));
        else CHECK_MPI(MPI_Reduce_scatter_block_c(sbuf, r_c, N, MPI_INT, MPI_SUM, w));
        break;
    case 13:
        for (int i = 0; i < size; i++) {
            icounts[i] = cnt(i, 1);
            ccounts[i] = icounts[i];
        }
        CHECK_MPI(MPI_Reduce_scatter(sbuf, r_int, icounts, MPI_INT, MPI_SUM, w));
        if (nb) CHECK_MPI(MPI_Ireduce_scatter_c(sbuf, r_c, ccounts, MPI_INT, MPI_SUM, w, &r));
        else CHECK_MPI(MPI_Reduce_scatter_c(sbuf, r_c, ccounts, MPI_INT, MPI_SUM, w));
        break;
    case 14:
        CHECK_MPI(MPI_Scan(sbuf, r_int, N, MPI_INT, MPI_SUM, w));
        if (nb) CHECK_MPI(MPI_Iscan_c(sbuf, r_c, N, MPI_INT, MPI_SUM, w, &r));
        else CHECK_MPI(MPI_Scan_c(sbuf, r_c, N, MPI_INT, MPI_SUM, w));
        break;
    default:
        CHECK_MPI(MPI_Exscan(sbuf, r_int, N, MPI_INT, MPI_SUM, w));
        if (nb) CHECK_MPI(MPI_Iexscan_c(sbuf, r_c, N, MPI_INT, MPI_SUM, w, &r));
        else CHECK_MPI(MPI_Exscan_c(sbuf, r_c, N, MPI_INT, MPI_SUM, w));
        break;
    }
    start_and_wait(&r, nb);
    if (kind == 15 && rank == 0) /* undefined at rank 0 */
        memcpy(r_c, r_int, N * sizeof(int));
}

/* ---- datatypes, pack, operations ------------------------------------------------------------ */

static void same_type(MPI_Datatype a, MPI_Datatype b, const char *what)
{
    MPI_Count sa, sb2, la, lb2, ea, eb, tla, tlb, tea, teb;
    MPI_Count ni, na, nl, nd;
    int ia, ia2, ib, ib2, ic, ic2, ca, cb;
    CHECK_MPI(MPI_Type_commit(&a));
    CHECK_MPI(MPI_Type_commit(&b));
    CHECK_MPI(MPI_Type_size_c(a, &sa));
    CHECK_MPI(MPI_Type_size_c(b, &sb2));
    CHECK_MPI(MPI_Type_get_extent_c(a, &la, &ea));
    CHECK_MPI(MPI_Type_get_extent_c(b, &lb2, &eb));
    CHECK_MPI(MPI_Type_get_true_extent_c(a, &tla, &tea));
    CHECK_MPI(MPI_Type_get_true_extent_c(b, &tlb, &teb));
    CHECK(sa == sb2 && la == lb2 && ea == eb && tla == tlb && tea == teb,
          "%s: size %lld/%lld lb %lld/%lld extent %lld/%lld true %lld,%lld/%lld,%lld", what,
          (long long)sa, (long long)sb2, (long long)la, (long long)lb2, (long long)ea, (long long)eb,
          (long long)tla, (long long)tea, (long long)tlb, (long long)teb);
    CHECK_MPI(MPI_Type_get_envelope(a, &ia, &ib, &ic, &ca));
    CHECK_MPI(MPI_Type_get_envelope_c(b, &ni, &na, &nl, &nd, &cb));
    CHECK(ca == cb && ni == ia && na == ib && nd == ic && nl == 0,
          "%s: envelopes differ (combiner %d/%d)", what, ca, cb);
    {
        int ints_a[64], ints_b[64];
        MPI_Aint ad_a[64], ad_b[64];
        MPI_Count lc[1];
        MPI_Datatype ta[64], tb[64];
        (void)ia2; (void)ib2; (void)ic2;
        CHECK_MPI(MPI_Type_get_contents(a, 64, 64, 64, ints_a, ad_a, ta));
        CHECK_MPI(MPI_Type_get_contents_c(b, 64, 64, 1, 64, ints_b, ad_b, lc, tb));
        check_ints(ints_b, ints_a, ia, what);
        for (int i = 0; i < ib; i++)
            CHECK(ad_a[i] == ad_b[i], "%s: address %d differs", what, i);
    }
    /* The same bytes go through both. */
    {
        int src[256], pa[256], pb[256];
        int pos_i = 0;
        MPI_Count pos_c = 0, ps;
        int psi;
        fill(src, 256, rank);
        CHECK_MPI(MPI_Pack(src, 2, a, pa, sizeof pa, &pos_i, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Pack_c(src, 2, b, pb, sizeof pb, &pos_c, MPI_COMM_WORLD));
        CHECK(pos_i == pos_c, "%s: packed %d / %lld bytes", what, pos_i, (long long)pos_c);
        CHECK(memcmp(pa, pb, (size_t)pos_i) == 0, "%s: packed bytes differ", what);
        CHECK_MPI(MPI_Pack_size(2, a, MPI_COMM_WORLD, &psi));
        CHECK_MPI(MPI_Pack_size_c(2, b, MPI_COMM_WORLD, &ps));
        CHECK(psi == ps, "%s: Pack_size %d, Pack_size_c %lld", what, psi, (long long)ps);
    }
    CHECK_MPI(MPI_Type_free(&a));
    CHECK_MPI(MPI_Type_free(&b));
}

static MPI_Count seen_len = -1;

static void add_c(void *in, void *inout, MPI_Count *len, MPI_Datatype *dt)
{
    (void)dt;
    seen_len = *len;
    for (MPI_Count i = 0; i < *len; i++)
        ((int *)inout)[i] += ((int *)in)[i];
}

static void types_pack_ops(void)
{
    MPI_Datatype a, b;
    int bl[3] = {2, 1, 3}, di[3] = {0, 4, 9}, gs[2] = {6, 8}, ss[2] = {3, 4}, st[2] = {1, 2};
    MPI_Count cbl[3] = {2, 1, 3}, cdi[3] = {0, 4, 9}, cgs[2] = {6, 8}, css[2] = {3, 4}, cst[2] = {1, 2};
    MPI_Aint ad[3] = {0, 16, 40};
    MPI_Count cad[3] = {0, 16, 40};
    MPI_Datatype ts[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
    int distrib[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC}, dargs[2] = {MPI_DISTRIBUTE_DFLT_DARG, 2};
    int psizes[2] = {1, 1};

    MPI_Type_contiguous(5, MPI_INT, &a); MPI_Type_contiguous_c(5, MPI_INT, &b); same_type(a, b, "contiguous");
    MPI_Type_vector(3, 2, 4, MPI_INT, &a); MPI_Type_vector_c(3, 2, 4, MPI_INT, &b); same_type(a, b, "vector");
    MPI_Type_create_hvector(3, 2, 20, MPI_INT, &a); MPI_Type_create_hvector_c(3, 2, 20, MPI_INT, &b); same_type(a, b, "hvector");
    MPI_Type_indexed(3, bl, di, MPI_INT, &a); MPI_Type_indexed_c(3, cbl, cdi, MPI_INT, &b); same_type(a, b, "indexed");
    MPI_Type_create_hindexed(3, bl, ad, MPI_INT, &a); MPI_Type_create_hindexed_c(3, cbl, cad, MPI_INT, &b); same_type(a, b, "hindexed");
    MPI_Type_create_indexed_block(3, 2, di, MPI_INT, &a); MPI_Type_create_indexed_block_c(3, 2, cdi, MPI_INT, &b); same_type(a, b, "indexed_block");
    MPI_Type_create_hindexed_block(3, 2, ad, MPI_INT, &a); MPI_Type_create_hindexed_block_c(3, 2, cad, MPI_INT, &b); same_type(a, b, "hindexed_block");
    MPI_Type_create_struct(3, bl, ad, ts, &a); MPI_Type_create_struct_c(3, cbl, cad, ts, &b); same_type(a, b, "struct");
    MPI_Type_create_subarray(2, gs, ss, st, MPI_ORDER_C, MPI_INT, &a); MPI_Type_create_subarray_c(2, cgs, css, cst, MPI_ORDER_C, MPI_INT, &b); same_type(a, b, "subarray");
    MPI_Type_create_darray(1, 0, 2, gs, distrib, dargs, psizes, MPI_ORDER_FORTRAN, MPI_INT, &a);
    MPI_Type_create_darray_c(1, 0, 2, cgs, distrib, dargs, psizes, MPI_ORDER_FORTRAN, MPI_INT, &b); same_type(a, b, "darray");
    MPI_Type_create_resized(MPI_INT, -4, 12, &a); MPI_Type_create_resized_c(MPI_INT, -4, 12, &b); same_type(a, b, "resized");

    /* external32 packing. */
    {
        double src[4] = {1.5, -2.25, 3.0, 1e300};
        unsigned char pa[64], pb[64];
        double back[4];
        MPI_Aint pos_a = 0, sz_a;
        MPI_Count pos_b = 0, sz_b, upos = 0;
        CHECK_MPI(MPI_Pack_external("external32", src, 4, MPI_DOUBLE, pa, sizeof pa, &pos_a));
        CHECK_MPI(MPI_Pack_external_c("external32", src, 4, MPI_DOUBLE, pb, sizeof pb, &pos_b));
        CHECK(pos_a == pos_b && memcmp(pa, pb, (size_t)pos_a) == 0, "Pack_external_c differs");
        CHECK_MPI(MPI_Pack_external_size("external32", 4, MPI_DOUBLE, &sz_a));
        CHECK_MPI(MPI_Pack_external_size_c("external32", 4, MPI_DOUBLE, &sz_b));
        CHECK(sz_a == sz_b && sz_b == 32, "Pack_external_size_c gave %lld", (long long)sz_b);
        CHECK_MPI(MPI_Unpack_external_c("external32", pb, pos_b, &upos, back, 4, MPI_DOUBLE));
        CHECK(upos == 32 && memcmp(back, src, sizeof src) == 0, "Unpack_external_c differs");
    }
    /* Unpack_c. */
    {
        int src[N], out[N];
        char packed[64];
        MPI_Count pos = 0, upos = 0;
        fill(src, N, rank);
        CHECK_MPI(MPI_Pack_c(src, N, MPI_INT, packed, sizeof packed, &pos, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Unpack_c(packed, pos, &upos, out, N, MPI_INT, MPI_COMM_WORLD));
        CHECK(upos == pos, "Unpack_c position %lld", (long long)upos);
        check_ints(out, src, N, "Unpack_c");
    }
    /* A user operation with an MPI_Count length, in a reduction and locally. */
    {
        MPI_Op op;
        int in[N], io[N], sum[N];
        CHECK_MPI(MPI_Op_create_c(add_c, 1, &op));
        fill(in, N, rank);
        CHECK_MPI(MPI_Allreduce_c(in, io, N, MPI_INT, op, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Allreduce(in, sum, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        /* A rank that only receives the result may not have called the function. */
        CHECK(seen_len == N || seen_len == -1, "the _c user function saw length %lld", (long long)seen_len);
        check_ints(io, sum, N, "Op_create_c");
        fill(io, N, 1);
        seen_len = -1;
        CHECK_MPI(MPI_Reduce_local_c(in, io, N, MPI_INT, op));
        CHECK(seen_len == N, "Reduce_local_c: the user function saw length %lld", (long long)seen_len);
        for (int i = 0; i < N; i++)
            CHECK(io[i] == val(1, i) + val(rank, i), "Reduce_local_c at %d", i);
        CHECK_MPI(MPI_Op_free(&op));
    }
    /* Counts past an int. */
    {
        MPI_Status st;
        int ci = 0;
        MPI_Count cc = 0, big = (MPI_Count)3 << 30;
        CHECK_MPI(MPI_Status_set_elements_x(&st, MPI_BYTE, big));
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &ci));
        CHECK(ci == MPI_UNDEFINED, "MPI_Get_count of 3 GiB gave %d, not MPI_UNDEFINED", ci);
        CHECK_MPI(MPI_Get_elements(&st, MPI_BYTE, &ci));
        CHECK(ci == MPI_UNDEFINED, "MPI_Get_elements of 3 GiB gave %d", ci);
        CHECK_MPI(MPI_Get_count_c(&st, MPI_BYTE, &cc));
        CHECK(cc == big, "MPI_Get_count_c gave %lld", (long long)cc);
        CHECK_MPI(MPI_Get_elements_c(&st, MPI_BYTE, &cc));
        CHECK(cc == big, "MPI_Get_elements_c gave %lld", (long long)cc);
        CHECK_MPI(MPI_Type_contiguous_c(big, MPI_BYTE, &a));
        CHECK_MPI(MPI_Type_size_c(a, &cc));
        CHECK(cc == big, "Type_contiguous_c of 3 GiB has size %lld", (long long)cc);
        CHECK_MPI(MPI_Type_size(a, &ci));
        CHECK(ci == MPI_UNDEFINED, "MPI_Type_size of 3 GiB gave %d", ci);
        CHECK_MPI(MPI_Type_free(&a));
    }
}

static void big_and_f90_types(void)
{
    MPI_Count big = (MPI_Count)2147483647 + 2147483647 / 1024, ni, na, nl, nd, lc[2] = {0, 0};
    MPI_Datatype t, t2, old[1];
    int c, n1, n2, n3, ints[4];
    MPI_Aint ad[1];
    CHECK_MPI(MPI_Type_contiguous_c(big, MPI_BYTE, &t));
    CHECK_MPI(MPI_Type_get_envelope_c(t, &ni, &na, &nl, &nd, &c));
    CHECK(c == MPI_COMBINER_CONTIGUOUS && ni == 0 && na == 0 && nl == 1 && nd == 1,
          "envelope_c of a 2^31+ contiguous: %lld ints %lld addresses %lld large %lld types",
          (long long)ni, (long long)na, (long long)nl, (long long)nd);
    CHECK_MPI(MPI_Type_get_contents_c(t, 0, 0, 2, 1, ints, ad, lc, old));
    CHECK(lc[0] == big && old[0] == MPI_BYTE, "contents_c: count %lld", (long long)lc[0]);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Type_get_envelope(t, &n1, &n2, &n3, &c), cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COUNT, "MPI_Type_get_envelope of a 2^31+ count: class %d", cls);
    CHECK_MPI(MPI_Type_free(&t));

    CHECK_MPI(MPI_Type_create_f90_real(15, MPI_UNDEFINED, &t));
    CHECK_MPI(MPI_Type_create_f90_real(15, MPI_UNDEFINED, &t2));
    CHECK(t == t2, "MPI_Type_create_f90_real(15) gave two handles");
    CHECK_MPI(MPI_Type_get_envelope_c(t, &ni, &na, &nl, &nd, &c));
    CHECK(c == MPI_COMBINER_F90_REAL && ni == 2 && na == 0 && nl == 0 && nd == 0,
          "f90_real envelope: combiner %d, %lld ints, %lld types", c, (long long)ni, (long long)nd);
    CHECK_MPI(MPI_Type_get_contents(t, 4, 0, 0, ints, ad, old));
    CHECK(ints[0] == 15 && ints[1] == MPI_UNDEFINED, "f90_real contents %d %d", ints[0], ints[1]);
    CHECK_MPI(MPI_Type_size(t, &n1));
    CHECK(n1 == 8, "f90_real(15) has size %d", n1);
    {
        double x[3] = {rank + 0.5, 2, 3}, y[3];
        CHECK_MPI(MPI_Allreduce(x, y, 3, t, MPI_SUM, MPI_COMM_WORLD));
        CHECK(y[0] == size * (size - 1) / 2.0 + size * 0.5 && y[2] == 3.0 * size,
              "Allreduce on an f90 real: %g %g", y[0], y[2]);
    }
    rc = MPI_Type_free(&t);
    CHECK(rc != MPI_SUCCESS, "an f90 type was freed");
    CHECK_MPI(MPI_Type_create_f90_integer(4, &t));
    CHECK_MPI(MPI_Type_get_envelope(t, &n1, &n2, &n3, &c));
    CHECK(c == MPI_COMBINER_F90_INTEGER && n1 == 1, "f90_integer envelope: %d, %d ints", c, n1);
    CHECK_MPI(MPI_Type_create_f90_complex(6, 30, &t));
    CHECK_MPI(MPI_Type_size(t, &n1));
    CHECK(n1 == 8, "f90_complex(6, 30) has size %d", n1);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("large_count");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size <= 64, "at most 64 ranks");
    vsetup(size);
    p2p();
    colls();
    types_pack_ops();
    big_and_f90_types();
    return test_end();
}
