/*
 * persistent_coll.c - persistent collectives (MPI-4): every *_init form, made once and started
 * many times with new buffer contents, against the blocking collective on the same data.
 *
 * Barrier_init, Bcast_init, Gather(v)_init, Scatter(v)_init, Allgather(v)_init,
 * Alltoall(v/w)_init, Reduce_init, Allreduce_init, Reduce_scatter(_block)_init, Scan_init,
 * Exscan_init (and the _init_c form of each that has one, alternately).  Starts go by MPI_Start
 * and by MPI_Startall of all of them at once; completion by Wait, Test in a loop, Waitall,
 * Testall, Waitany and Waitsome in turn.  A persistent request stays allocated and inactive after
 * completion (a Wait on it then returns at once); MPI_Request_free frees it.  Then one
 * Allreduce_init of one int is started 10,000 times (2,000 at more than 3 ranks), each result
 * checked.  Between the calls and the starts the count, displacement and type arrays are
 * overwritten: a start must use what its _init call was given.
 */
#include "stormtest.h"

#include <string.h>

#define NK 17
#define CAP 2048
#define ITERS 6

static int rank, size;
static int sbuf[NK][CAP], rbuf[NK][CAP], want[NK][CAP];
static int cnts[NK][64], dsps[NK][64], rcnts[NK][64], rdsps[NK][64], wsd[64], wrd[64];
static MPI_Count ccnts[NK][64], crcnts[NK][64];
static MPI_Aint cdsps[NK][64], crdsps[NK][64], cwsd[64], cwrd[64];
static MPI_Datatype types[64];

#define N 5

static int cnt(int from, int to) { return (from * 5 + to * 3) % 4 + 1; }

/* Makes persistent collective k (the _c form when `wide`), or runs its blocking form into
 * `want[k]` (`req` NULL). */
static void coll(int k, int wide, MPI_Request *req)
{
    MPI_Comm w = MPI_COMM_WORLD;
    MPI_Info in = MPI_INFO_NULL;
    int root = k % size;
    int *s = sbuf[k], *r = req ? rbuf[k] : want[k];
    switch (k) {
    case 0:
        if (!req) CHECK_MPI(MPI_Barrier(w));
        else CHECK_MPI(MPI_Barrier_init(w, in, req));
        break;
    case 1: /* Bcast works in place: the sender's data is in s at the root */
        if (!req) { memcpy(r, s, sizeof sbuf[k]); CHECK_MPI(MPI_Bcast(r, N, MPI_INT, root, w)); }
        else if (wide) CHECK_MPI(MPI_Bcast_init_c(s, N, MPI_INT, root, w, in, req));
        else CHECK_MPI(MPI_Bcast_init(s, N, MPI_INT, root, w, in, req));
        break;
    case 2:
        if (!req) CHECK_MPI(MPI_Gather(s, N, MPI_INT, r, N, MPI_INT, root, w));
        else if (wide) CHECK_MPI(MPI_Gather_init_c(s, N, MPI_INT, r, N, MPI_INT, root, w, in, req));
        else CHECK_MPI(MPI_Gather_init(s, N, MPI_INT, r, N, MPI_INT, root, w, in, req));
        break;
    case 3:
        if (!req) CHECK_MPI(MPI_Gatherv(s, cnt(rank, root), MPI_INT, r, cnts[k], dsps[k], MPI_INT, root, w));
        else if (wide) CHECK_MPI(MPI_Gatherv_init_c(s, cnt(rank, root), MPI_INT, r, ccnts[k], cdsps[k], MPI_INT, root, w, in, req));
        else CHECK_MPI(MPI_Gatherv_init(s, cnt(rank, root), MPI_INT, r, cnts[k], dsps[k], MPI_INT, root, w, in, req));
        break;
    case 4:
        if (!req) CHECK_MPI(MPI_Scatter(s, N, MPI_INT, r, N, MPI_INT, root, w));
        else if (wide) CHECK_MPI(MPI_Scatter_init_c(s, N, MPI_INT, r, N, MPI_INT, root, w, in, req));
        else CHECK_MPI(MPI_Scatter_init(s, N, MPI_INT, r, N, MPI_INT, root, w, in, req));
        break;
    case 5:
        if (!req) CHECK_MPI(MPI_Scatterv(s, cnts[k], dsps[k], MPI_INT, r, cnt(root, rank), MPI_INT, root, w));
        else if (wide) CHECK_MPI(MPI_Scatterv_init_c(s, ccnts[k], cdsps[k], MPI_INT, r, cnt(root, rank), MPI_INT, root, w, in, req));
        else CHECK_MPI(MPI_Scatterv_init(s, cnts[k], dsps[k], MPI_INT, r, cnt(root, rank), MPI_INT, root, w, in, req));
        break;
    case 6:
        if (!req) CHECK_MPI(MPI_Allgather(s, N, MPI_INT, r, N, MPI_INT, w));
        else if (wide) CHECK_MPI(MPI_Allgather_init_c(s, N, MPI_INT, r, N, MPI_INT, w, in, req));
        else CHECK_MPI(MPI_Allgather_init(s, N, MPI_INT, r, N, MPI_INT, w, in, req));
        break;
    case 7:
        if (!req) CHECK_MPI(MPI_Allgatherv(s, cnt(rank, 0), MPI_INT, r, cnts[k], dsps[k], MPI_INT, w));
        else if (wide) CHECK_MPI(MPI_Allgatherv_init_c(s, cnt(rank, 0), MPI_INT, r, ccnts[k], cdsps[k], MPI_INT, w, in, req));
        else CHECK_MPI(MPI_Allgatherv_init(s, cnt(rank, 0), MPI_INT, r, cnts[k], dsps[k], MPI_INT, w, in, req));
        break;
    case 8:
        if (!req) CHECK_MPI(MPI_Alltoall(s, N, MPI_INT, r, N, MPI_INT, w));
        else if (wide) CHECK_MPI(MPI_Alltoall_init_c(s, N, MPI_INT, r, N, MPI_INT, w, in, req));
        else CHECK_MPI(MPI_Alltoall_init(s, N, MPI_INT, r, N, MPI_INT, w, in, req));
        break;
    case 9:
        if (!req) CHECK_MPI(MPI_Alltoallv(s, cnts[k], dsps[k], MPI_INT, r, rcnts[k], rdsps[k], MPI_INT, w));
        else if (wide) CHECK_MPI(MPI_Alltoallv_init_c(s, ccnts[k], cdsps[k], MPI_INT, r, crcnts[k], crdsps[k], MPI_INT, w, in, req));
        else CHECK_MPI(MPI_Alltoallv_init(s, cnts[k], dsps[k], MPI_INT, r, rcnts[k], rdsps[k], MPI_INT, w, in, req));
        break;
    case 10:
        if (!req) CHECK_MPI(MPI_Alltoallw(s, cnts[k], wsd, types, r, rcnts[k], wrd, types, w));
        else if (wide) CHECK_MPI(MPI_Alltoallw_init_c(s, ccnts[k], cwsd, types, r, crcnts[k], cwrd, types, w, in, req));
        else CHECK_MPI(MPI_Alltoallw_init(s, cnts[k], wsd, types, r, rcnts[k], wrd, types, w, in, req));
        break;
    case 11:
        if (!req) CHECK_MPI(MPI_Reduce(s, r, N, MPI_INT, MPI_SUM, root, w));
        else if (wide) CHECK_MPI(MPI_Reduce_init_c(s, r, N, MPI_INT, MPI_SUM, root, w, in, req));
        else CHECK_MPI(MPI_Reduce_init(s, r, N, MPI_INT, MPI_SUM, root, w, in, req));
        break;
    case 12:
        if (!req) CHECK_MPI(MPI_Allreduce(s, r, N, MPI_INT, MPI_SUM, w));
        else if (wide) CHECK_MPI(MPI_Allreduce_init_c(s, r, N, MPI_INT, MPI_SUM, w, in, req));
        else CHECK_MPI(MPI_Allreduce_init(s, r, N, MPI_INT, MPI_SUM, w, in, req));
        break;
    case 13:
        if (!req) CHECK_MPI(MPI_Reduce_scatter_block(s, r, N, MPI_INT, MPI_SUM, w));
        else if (wide) CHECK_MPI(MPI_Reduce_scatter_block_init_c(s, r, N, MPI_INT, MPI_SUM, w, in, req));
        else CHECK_MPI(MPI_Reduce_scatter_block_init(s, r, N, MPI_INT, MPI_SUM, w, in, req));
        break;
    case 14:
        if (!req) CHECK_MPI(MPI_Reduce_scatter(s, r, cnts[k], MPI_INT, MPI_SUM, w));
        else if (wide) CHECK_MPI(MPI_Reduce_scatter_init_c(s, r, ccnts[k], MPI_INT, MPI_SUM, w, in, req));
        else CHECK_MPI(MPI_Reduce_scatter_init(s, r, cnts[k], MPI_INT, MPI_SUM, w, in, req));
        break;
    case 15:
        if (!req) CHECK_MPI(MPI_Scan(s, r, N, MPI_INT, MPI_MAX, w));
        else if (wide) CHECK_MPI(MPI_Scan_init_c(s, r, N, MPI_INT, MPI_MAX, w, in, req));
        else CHECK_MPI(MPI_Scan_init(s, r, N, MPI_INT, MPI_MAX, w, in, req));
        break;
    default:
        if (!req) CHECK_MPI(MPI_Exscan(s, r, N, MPI_INT, MPI_SUM, w));
        else if (wide) CHECK_MPI(MPI_Exscan_init_c(s, r, N, MPI_INT, MPI_SUM, w, in, req));
        else CHECK_MPI(MPI_Exscan_init(s, r, N, MPI_INT, MPI_SUM, w, in, req));
        break;
    }
}

static void setup_counts(void)
{
    for (int k = 0; k < NK; k++) {
        int root = k % size, at = 0, rat = 0;
        for (int i = 0; i < size; i++) {
            int c, rc;
            switch (k) {
            case 3: c = cnt(i, root); rc = 0; break;
            case 5: c = cnt(root, i); rc = 0; break;
            case 7: c = cnt(i, 0); rc = 0; break;
            case 9: case 10: c = cnt(rank, i); rc = cnt(i, rank); break;
            default: c = cnt(i, 1); rc = 0; break;
            }
            cnts[k][i] = c; ccnts[k][i] = c;
            dsps[k][i] = at + 1; cdsps[k][i] = at + 1;
            rcnts[k][i] = rc; crcnts[k][i] = rc;
            rdsps[k][i] = rat + 2; crdsps[k][i] = rat + 2;
            at += c + 1;
            rat += rc + 2;
            if (k == 10) {
                wsd[i] = dsps[k][i] * 4; cwsd[i] = wsd[i];
                wrd[i] = rdsps[k][i] * 4; cwrd[i] = wrd[i];
                types[i] = MPI_INT;
            }
        }
    }
}

/* The arrays an _init call was given may be changed once it returns (MPI 4.1; mpi4py frees the
 * ones it converted): every start must use the values the call saw. */
static void scramble(void)
{
    for (int k = 0; k < NK; k++)
        for (int i = 0; i < 64; i++) {
            cnts[k][i] = dsps[k][i] = rcnts[k][i] = rdsps[k][i] = -1000003;
            ccnts[k][i] = crcnts[k][i] = -1000003;
            cdsps[k][i] = crdsps[k][i] = -1000003;
        }
    for (int i = 0; i < 64; i++) {
        wsd[i] = wrd[i] = -1000003;
        cwsd[i] = cwrd[i] = -1000003;
        types[i] = MPI_DATATYPE_NULL;
    }
}

static void refill(int iter)
{
    for (int k = 0; k < NK; k++)
        for (int i = 0; i < CAP; i++) {
            sbuf[k][i] = (rank + 1) * 10000 + iter * 100 + k * 7 + i;
            rbuf[k][i] = want[k][i] = -7;
        }
}

static void expect(int k)
{
    int root = k % size;
    for (int i = 0; i < CAP; i++) {
        int got = rbuf[k][i], exp = want[k][i];
        if (k == 16 && rank == 0)
            break; /* Exscan: undefined at rank 0 */
        if (k == 1)
            got = sbuf[k][i]; /* Bcast in place */
        CHECK(got == exp, "collective %d (root %d): element %d is %d, blocking gave %d", k, root, i, got, exp);
    }
}

static void complete(MPI_Request *reqs, int n, int how)
{
    int idx, outc, flag, ind[NK];
    switch (how % 6) {
    case 0:
        for (int i = 0; i < n; i++)
            CHECK_MPI(MPI_Wait(&reqs[i], MPI_STATUS_IGNORE));
        break;
    case 1:
        for (int i = 0; i < n; i++) {
            flag = 0;
            while (!flag)
                CHECK_MPI(MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE));
        }
        break;
    case 2:
        CHECK_MPI(MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE));
        break;
    case 3:
        flag = 0;
        while (!flag)
            CHECK_MPI(MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE));
        break;
    case 4:
        for (int i = 0; i < n; i++) {
            CHECK_MPI(MPI_Waitany(n, reqs, &idx, MPI_STATUS_IGNORE));
            CHECK(idx != MPI_UNDEFINED, "Waitany found nothing active at round %d", i);
        }
        CHECK_MPI(MPI_Waitany(n, reqs, &idx, MPI_STATUS_IGNORE));
        CHECK(idx == MPI_UNDEFINED, "Waitany: every persistent request should be inactive");
        break;
    default: {
        int done = 0;
        while (done < n) {
            CHECK_MPI(MPI_Waitsome(n, reqs, &outc, ind, MPI_STATUSES_IGNORE));
            CHECK(outc != MPI_UNDEFINED, "Waitsome found nothing active after %d", done);
            done += outc;
        }
        break;
    }
    }
    for (int i = 0; i < n; i++)
        CHECK(reqs[i] != MPI_REQUEST_NULL, "persistent request %d freed by completion", i);
}

int main(int argc, char **argv)
{
    MPI_Request reqs[NK];
    MPI_Init(&argc, &argv);
    test_begin("persistent_coll");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size <= 64, "at most 64 ranks");

    for (int wide = 0; wide < 2; wide++) {
        setup_counts();
        for (int k = 0; k < NK; k++)
            coll(k, wide, &reqs[k]);
        for (int iter = 0; iter < ITERS; iter++) {
            refill(iter + 10 * wide);
            setup_counts();
            for (int k = 0; k < NK; k++)
                coll(k, wide, NULL);
            scramble();
            if (iter % 2 == 0) {
                CHECK_MPI(MPI_Startall(NK, reqs));
                complete(reqs, NK, iter / 2 + wide);
            } else {
                for (int k = 0; k < NK; k++) {
                    CHECK_MPI(MPI_Start(&reqs[k]));
                    complete(&reqs[k], 1, iter + k);
                }
            }
            for (int k = 0; k < NK; k++)
                expect(k);
        }
        /* Inactive: a wait returns at once. */
        CHECK_MPI(MPI_Wait(&reqs[0], MPI_STATUS_IGNORE));
        for (int k = 0; k < NK; k++) {
            CHECK_MPI(MPI_Request_free(&reqs[k]));
            CHECK(reqs[k] == MPI_REQUEST_NULL, "Request_free left request %d", k);
        }
    }

    /* Many starts of one. */
    {
        int starts = size <= 3 ? 10000 : 2000, in, out;
        MPI_Request r;
        CHECK_MPI(MPI_Allreduce_init(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
        for (int i = 0; i < starts; i++) {
            in = rank + i;
            CHECK_MPI(MPI_Start(&r));
            CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
            CHECK(out == size * (size - 1) / 2 + size * i, "start %d: sum %d", i, out);
        }
        CHECK_MPI(MPI_Request_free(&r));
    }
    return test_end();
}
