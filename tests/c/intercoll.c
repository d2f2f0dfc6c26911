/*
 * intercoll.c - collectives on intercommunicators, blocking and non-blocking.
 *
 * MPI_COMM_WORLD is split into two groups of unequal size (1 + 1 at two ranks), once as a
 * leading block and the rest, once as even and odd ranks, and an intercommunicator is made of
 * each.  On each, every collective the standard defines on intercommunicators runs blocking and
 * as its I-form (then MPI_Wait), for counts 0, 1, 7 and a large one (>= 1 MiB per rank), and is
 * checked element by element against values computed locally: Barrier, Bcast, Gather(v),
 * Scatter(v), Allgather(v), Alltoall(v/w), Reduce, Allreduce, Reduce_scatter(_block).  Rooted
 * ones run with the root in either group, as its first and its last rank (MPI_ROOT there,
 * MPI_PROC_NULL at the root group's others, whose buffers must stay untouched).  A strided vector
 * type (holes checked untouched) for Bcast and Allgather (not for reductions: MPICH allows
 * predefined operations on predefined types only).  Several non-blocking ones in
 * flight at once.  MPI_IN_PLACE must be rejected (MPI_ERR_BUFFER or MPI_ERR_ARG; checked for
 * Allreduce, where MPICH checks it too) and MPI_Scan and MPI_Exscan on an intercommunicator too
 * (MPI_ERR_COMM), and a neighbourhood collective (MPI_ERR_COMM, or MPI_ERR_TOPOLOGY as MPICH
 * says).  Finally MPI_Intercomm_merge and an Allreduce on
 * the merged communicator.
 *
 * usage: intercoll [--no-ibcast] [--no-rejections] [--no-neighbor] [large_ints]
 *        (large_ints: default 262144, 1 MiB of ints)
 */
#include "stormtest.h"

static int g_me;      /* my group: 0 or 1 */
static int r_me;      /* my rank in my group */
static int p_me;      /* local size */
static int q_rem;     /* remote size */
static int nonblock;  /* 1: I-forms */
static MPI_Comm ic;   /* the intercommunicator under test */
static MPI_Datatype vec;  /* ints 0 and 2 of four: two holes */
static const char *what = "";
static int no_ibcast; /* --no-ibcast: see run-reference.sh (MPICH 4.0.2 bugs) */
static int no_rejections; /* --no-rejections: see run-reference.sh (Open MPI 4.1.4) */
static int no_neighbor; /* --no-neighbor: see run-reference.sh (MPICH 4.0.2) */

/* The value element i of a buffer of process (g, r) holds, in test k. */
static int val(int g, int r, int k, long i)
{
    return (int)(((unsigned)(g + 1) * 1000003u + (unsigned)r * 7919u + (unsigned long)i * 131u +
                  (unsigned)k * 17u) % 100000u);
}

static void done(MPI_Request *rq)
{
    if (nonblock)
        CHECK_MPI(MPI_Wait(rq, MPI_STATUS_IGNORE));
}

#define RUN(blocking, ...)                                                     \
    do {                                                                       \
        MPI_Request rq_ = MPI_REQUEST_NULL;                                    \
        if (nonblock) {                                                        \
            CHECK_MPI(__VA_ARGS__);                                            \
        } else {                                                               \
            CHECK_MPI(blocking);                                               \
        }                                                                      \
        done(&rq_);                                                            \
    } while (0)
#define RQ (&rq_)

static int *ialloc(long n)
{
    int *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    CHECK(p != NULL, "malloc of %ld ints", n);
    return p;
}

static void check_ints(const int *got, long n, int g, int r, int k, long off, const char *where)
{
    long i;
    for (i = 0; i < n; i++)
        if (got[i] != val(g, r, k, off + i))
            FAIL("%s %s: element %ld is %d, expected %d (group %d rank %d)", what, where, i,
                 got[i], val(g, r, k, off + i), g, r);
}

static void check_untouched(const int *b, long n, const char *where)
{
    long i;
    for (i = 0; i < n; i++)
        if (b[i] != -7)
            FAIL("%s %s: element %ld changed to %d at a process that takes no part", what, where,
                 i, b[i]);
}

static void fill(int *b, long n, int v)
{
    long i;
    for (i = 0; i < n; i++)
        b[i] = v;
}

/* Root argument for root rank rr of group rg. */
static int root_arg(int rg, int rr)
{
    if (rg == g_me)
        return r_me == rr ? MPI_ROOT : MPI_PROC_NULL;
    return rr;
}

static void t_bcast(long n, int k, int rg, int rr)
{
    int root = root_arg(rg, rr);
    int *b = ialloc(n);
    what = "Bcast";
    if (root == MPI_ROOT) {
        long i;
        for (i = 0; i < n; i++)
            b[i] = val(rg, rr, k, i);
    } else
        fill(b, n, -7);
    RUN(MPI_Bcast(b, (int)n, MPI_INT, root, ic), MPI_Ibcast(b, (int)n, MPI_INT, root, ic, RQ));
    if (root == MPI_PROC_NULL)
        check_untouched(b, n, "buffer");
    else
        check_ints(b, n, rg, rr, k, 0, "buffer");
    free(b);
}

static void t_bcast_vec(long n, int k, int rg, int rr)
{
    int root = root_arg(rg, rr);
    long i, len = 4 * n;
    int *b = ialloc(len);
    what = "Bcast(vector)";
    fill(b, len, -7);
    if (root == MPI_ROOT)
        for (i = 0; i < n; i++) {
            b[4 * i] = val(rg, rr, k, 2 * i);
            b[4 * i + 2] = val(rg, rr, k, 2 * i + 1);
        }
    RUN(MPI_Bcast(b, (int)n, vec, root, ic), MPI_Ibcast(b, (int)n, vec, root, ic, RQ));
    for (i = 0; i < n && root != MPI_PROC_NULL; i++)
        if (b[4 * i] != val(rg, rr, k, 2 * i) || b[4 * i + 2] != val(rg, rr, k, 2 * i + 1) ||
            b[4 * i + 1] != -7 || b[4 * i + 3] != -7)
            FAIL("Bcast(vector) k %d root %d/%d%s: instance %ld is (%d %d %d %d)", k, rg, rr, nonblock ? " (Ibcast)" : "", i, b[4 * i], b[4 * i + 1],
                 b[4 * i + 2], b[4 * i + 3]);
    if (root == MPI_PROC_NULL)
        check_untouched(b, len, "buffer");
    free(b);
}

static void t_gather(long n, int k, int rg, int rr, int v)
{
    int root = root_arg(rg, rr);
    int *counts = ialloc(q_rem), *displs = ialloc(q_rem);
    long total = 0, j, mine = n + (v ? r_me % 2 : 0);
    int *s = ialloc(mine), *r;
    what = v ? "Gatherv" : "Gather";
    for (j = 0; j < q_rem; j++) {
        counts[j] = (int)(n + (v ? j % 2 : 0));
        displs[j] = (int)(total + (v ? 1 : 0));
        total += counts[j] + (v ? 1 : 0);
    }
    if (!v)
        total = n * q_rem;
    r = ialloc(total);
    fill(r, total, -7);
    for (j = 0; j < mine; j++)
        s[j] = val(g_me, r_me, k, j);
    if (v)
        RUN(MPI_Gatherv(s, (int)mine, MPI_INT, r, counts, displs, MPI_INT, root, ic),
            MPI_Igatherv(s, (int)mine, MPI_INT, r, counts, displs, MPI_INT, root, ic, RQ));
    else
        RUN(MPI_Gather(s, (int)n, MPI_INT, r, (int)n, MPI_INT, root, ic),
            MPI_Igather(s, (int)n, MPI_INT, r, (int)n, MPI_INT, root, ic, RQ));
    if (root == MPI_ROOT)
        for (j = 0; j < q_rem; j++)
            check_ints(r + (v ? displs[j] : j * n), v ? counts[j] : n, 1 - g_me, (int)j, k, 0,
                       "received block");
    else
        check_untouched(r, total, "receive buffer");
    free(s);
    free(r);
    free(counts);
    free(displs);
}

static void t_scatter(long n, int k, int rg, int rr, int v)
{
    int root = root_arg(rg, rr);
    int *counts = ialloc(q_rem), *displs = ialloc(q_rem);
    long total = 0, j, mine = n + (v ? r_me % 2 : 0);
    int *s, *r = ialloc(mine);
    what = v ? "Scatterv" : "Scatter";
    for (j = 0; j < q_rem; j++) {
        counts[j] = (int)(n + (v ? j % 2 : 0));
        displs[j] = (int)(total + (v ? 1 : 0));
        total += counts[j] + (v ? 1 : 0);
    }
    if (!v)
        total = n * q_rem;
    s = ialloc(total);
    fill(s, total, -7);
    if (root == MPI_ROOT)
        for (j = 0; j < q_rem; j++) {
            long i;
            int *blk = s + (v ? displs[j] : j * n);
            for (i = 0; i < (v ? counts[j] : n); i++)
                blk[i] = val(g_me, (int)j, k, i);
        }
    fill(r, mine, -7);
    if (v)
        RUN(MPI_Scatterv(s, counts, displs, MPI_INT, r, (int)mine, MPI_INT, root, ic),
            MPI_Iscatterv(s, counts, displs, MPI_INT, r, (int)mine, MPI_INT, root, ic, RQ));
    else
        RUN(MPI_Scatter(s, (int)n, MPI_INT, r, (int)n, MPI_INT, root, ic),
            MPI_Iscatter(s, (int)n, MPI_INT, r, (int)n, MPI_INT, root, ic, RQ));
    if (root != MPI_ROOT && root != MPI_PROC_NULL)
        check_ints(r, mine, rg, r_me, k, 0, "received block");
    else
        check_untouched(r, mine, "receive buffer");
    free(s);
    free(r);
    free(counts);
    free(displs);
}

static void t_allgather(long n, int k, int v)
{
    int *counts = ialloc(q_rem), *displs = ialloc(q_rem);
    long total = 0, j, mine = n + (v ? r_me % 2 : 0);
    int *s = ialloc(mine), *r;
    what = v ? "Allgatherv" : "Allgather";
    for (j = 0; j < q_rem; j++) {
        counts[j] = (int)(n + (v ? j % 2 : 0));
        displs[j] = (int)(total + (v ? 2 : 0));
        total += counts[j] + (v ? 2 : 0);
    }
    if (!v)
        total = n * q_rem;
    r = ialloc(total);
    fill(r, total, -7);
    for (j = 0; j < mine; j++)
        s[j] = val(g_me, r_me, k, j);
    if (v)
        RUN(MPI_Allgatherv(s, (int)mine, MPI_INT, r, counts, displs, MPI_INT, ic),
            MPI_Iallgatherv(s, (int)mine, MPI_INT, r, counts, displs, MPI_INT, ic, RQ));
    else
        RUN(MPI_Allgather(s, (int)n, MPI_INT, r, (int)n, MPI_INT, ic),
            MPI_Iallgather(s, (int)n, MPI_INT, r, (int)n, MPI_INT, ic, RQ));
    for (j = 0; j < q_rem; j++) {
        check_ints(r + (v ? displs[j] : j * n), v ? counts[j] : n, 1 - g_me, (int)j, k, 0,
                   "received block");
        if (v && (r[displs[j] - 1] != -7 || r[displs[j] - 2] != -7))
            FAIL("Allgatherv: gap before block %ld written", j);
    }
    free(s);
    free(r);
    free(counts);
    free(displs);
}

static void t_allgather_vec(long n, int k)
{
    long i, j, slen = 4 * n, rlen = 4 * n * q_rem;
    int *s = ialloc(slen), *r = ialloc(rlen);
    what = "Allgather(vector)";
    fill(s, slen, -5);
    fill(r, rlen, -7);
    for (i = 0; i < 2 * n; i++)
        s[2 * i] = val(g_me, r_me, k, i);
    RUN(MPI_Allgather(s, (int)n, vec, r, (int)n, vec, ic),
        MPI_Iallgather(s, (int)n, vec, r, (int)n, vec, ic, RQ));
    for (j = 0; j < q_rem; j++)
        for (i = 0; i < 2 * n; i++) {
            int *b = r + j * 4 * n;
            if (b[2 * i] != val(1 - g_me, (int)j, k, i) || b[2 * i + 1] != -7)
                FAIL("Allgather(vector): block %ld element %ld is %d (hole %d), expected %d", j,
                     i, b[2 * i], b[2 * i + 1], val(1 - g_me, (int)j, k, i));
        }
    free(s);
    free(r);
}

static void t_alltoall(long n, int k, int kind /* 0 plain, 1 v, 2 w */)
{
    int *sc = ialloc(q_rem), *sd = ialloc(q_rem), *rc = ialloc(q_rem), *rd = ialloc(q_rem);
    MPI_Datatype *ty = malloc(sizeof(MPI_Datatype) * (size_t)q_rem);
    long st = 0, rt = 0, j, i;
    int *s, *r;
    what = kind == 0 ? "Alltoall" : kind == 1 ? "Alltoallv" : "Alltoallw";
    for (j = 0; j < q_rem; j++) {
        ty[j] = MPI_INT;
        sc[j] = (int)(n + (kind ? (r_me + j) % 2 : 0));
        rc[j] = (int)(n + (kind ? (r_me + j) % 2 : 0));
        sd[j] = (int)(st + (kind ? 1 : 0));
        rd[j] = (int)(rt + (kind ? 1 : 0));
        st += sc[j] + (kind ? 1 : 0);
        rt += rc[j] + (kind ? 1 : 0);
    }
    s = ialloc(st);
    r = ialloc(rt);
    fill(s, st, -5);
    fill(r, rt, -7);
    /* Block for remote j: values of test k + 1000 * (j + 1). */
    for (j = 0; j < q_rem; j++)
        for (i = 0; i < sc[j]; i++)
            s[(kind ? sd[j] : j * n) + i] = val(g_me, r_me, k + 1000 * (int)(j + 1), i);
    if (kind == 0)
        RUN(MPI_Alltoall(s, (int)n, MPI_INT, r, (int)n, MPI_INT, ic),
            MPI_Ialltoall(s, (int)n, MPI_INT, r, (int)n, MPI_INT, ic, RQ));
    else if (kind == 1)
        RUN(MPI_Alltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, ic),
            MPI_Ialltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, ic, RQ));
    else {
        for (j = 0; j < q_rem; j++) {
            sd[j] *= (int)sizeof(int);
            rd[j] *= (int)sizeof(int);
        }
        RUN(MPI_Alltoallw(s, sc, sd, ty, r, rc, rd, ty, ic),
            MPI_Ialltoallw(s, sc, sd, ty, r, rc, rd, ty, ic, RQ));
        for (j = 0; j < q_rem; j++)
            rd[j] /= (int)sizeof(int);
    }
    for (j = 0; j < q_rem; j++)
        check_ints(r + (kind ? rd[j] : j * n), rc[j], 1 - g_me, (int)j, k + 1000 * (r_me + 1), 0,
                   "received block");
    free(s);
    free(r);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    free(ty);
}

/* Sum over the remote group of val(1 - g, j, k, off + i). */
static int remote_sum(int k, long idx)
{
    int j, t = 0;
    for (j = 0; j < q_rem; j++)
        t += val(1 - g_me, j, k, idx);
    return t;
}

static void t_reduce(long n, int k, int rg, int rr)
{
    int root = root_arg(rg, rr);
    int *s = ialloc(n), *r = ialloc(n);
    long i;
    what = "Reduce";
    for (i = 0; i < n; i++)
        s[i] = val(g_me, r_me, k, i);
    fill(r, n, -7);
    RUN(MPI_Reduce(s, r, (int)n, MPI_INT, MPI_SUM, root, ic),
        MPI_Ireduce(s, r, (int)n, MPI_INT, MPI_SUM, root, ic, RQ));
    if (root == MPI_ROOT) {
        for (i = 0; i < n; i++)
            if (r[i] != remote_sum(k, i))
                FAIL("Reduce: element %ld is %d, expected %d", i, r[i], remote_sum(k, i));
    } else
        check_untouched(r, n, "receive buffer");
    free(s);
    free(r);
}

static void t_allreduce(long n, int k, int usevec)
{
    long i, len = usevec ? 4 * n : n;
    int *s = ialloc(len), *r = ialloc(len);
    what = usevec ? "Allreduce(vector)" : "Allreduce";
    fill(s, len, -5);
    fill(r, len, -7);
    for (i = 0; i < (usevec ? 2 * n : n); i++)
        s[usevec ? 2 * i : i] = val(g_me, r_me, k, i);
    if (usevec)
        RUN(MPI_Allreduce(s, r, (int)n, vec, MPI_SUM, ic),
            MPI_Iallreduce(s, r, (int)n, vec, MPI_SUM, ic, RQ));
    else
        RUN(MPI_Allreduce(s, r, (int)n, MPI_INT, MPI_SUM, ic),
            MPI_Iallreduce(s, r, (int)n, MPI_INT, MPI_SUM, ic, RQ));
    for (i = 0; i < (usevec ? 2 * n : n); i++) {
        int got = r[usevec ? 2 * i : i];
        if (got != remote_sum(k, i))
            FAIL("%s: element %ld is %d, expected %d", what, i, got, remote_sum(k, i));
        if (usevec && r[2 * i + 1] != -7)
            FAIL("%s: hole after element %ld written", what, i);
    }
    free(s);
    free(r);
}

static void t_reduce_scatter(long n, int k, int block)
{
    /* Both groups reduce vectors of the same length T; each local rank gets its share. */
    long T = block ? n * p_me * q_rem : n + (n > 0), i, off = 0;
    int *counts = ialloc(p_me), j;
    int *s, *r;
    what = block ? "Reduce_scatter_block" : "Reduce_scatter";
    for (j = 0; j < p_me; j++)
        counts[j] = (int)(T / p_me + (j < T % p_me));
    for (j = 0; j < r_me; j++)
        off += counts[j];
    s = ialloc(T);
    r = ialloc(counts[r_me]);
    for (i = 0; i < T; i++)
        s[i] = val(g_me, r_me, k, i);
    fill(r, counts[r_me], -7);
    if (block)
        RUN(MPI_Reduce_scatter_block(s, r, counts[0], MPI_INT, MPI_SUM, ic),
            MPI_Ireduce_scatter_block(s, r, counts[0], MPI_INT, MPI_SUM, ic, RQ));
    else
        RUN(MPI_Reduce_scatter(s, r, counts, MPI_INT, MPI_SUM, ic),
            MPI_Ireduce_scatter(s, r, counts, MPI_INT, MPI_SUM, ic, RQ));
    for (i = 0; i < counts[r_me]; i++)
        if (r[i] != remote_sum(k, off + i))
            FAIL("%s: element %ld is %d, expected %d", what, i, r[i], remote_sum(k, off + i));
    free(s);
    free(r);
    free(counts);
}

static void t_barrier(void)
{
    what = "Barrier";
    RUN(MPI_Barrier(ic), MPI_Ibarrier(ic, RQ));
}

/* Several non-blocking collectives in flight at once. */
static void t_in_flight(int k)
{
    int a[7], b[7], c[7 * 8], d[7];
    MPI_Request rq[4];
    int i, j, root = root_arg(0, 0);
    what = "in flight";
    for (i = 0; i < 7; i++) {
        a[i] = val(g_me, r_me, k, i);
        b[i] = root == MPI_ROOT ? val(0, 0, k + 1, i) : -7;
    }
    CHECK(q_rem <= 8, "remote group larger than the test's buffers");
    CHECK_MPI(MPI_Iallreduce(a, d, 7, MPI_INT, MPI_SUM, ic, &rq[0]));
    CHECK_MPI(MPI_Ibcast(b, 7, MPI_INT, root, ic, &rq[1]));
    CHECK_MPI(MPI_Iallgather(a, 7, MPI_INT, c, 7, MPI_INT, ic, &rq[2]));
    CHECK_MPI(MPI_Ibarrier(ic, &rq[3]));
    CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
    CHECK_MPI(MPI_Waitall(2, rq + 2, MPI_STATUSES_IGNORE));
    for (i = 0; i < 7; i++) {
        if (d[i] != remote_sum(k, i))
            FAIL("in flight: Iallreduce element %d is %d, expected %d", i, d[i], remote_sum(k, i));
        if (root != MPI_PROC_NULL && b[i] != val(0, 0, k + 1, i))
            FAIL("in flight: Ibcast element %d is %d", i, b[i]);
        for (j = 0; j < q_rem; j++)
            if (c[j * 7 + i] != val(1 - g_me, j, k, i))
                FAIL("in flight: Iallgather block %d element %d is %d", j, i, c[j * 7 + i]);
    }
}

static void t_rejected(void)
{
    int x[4] = {1, 2, 3, 4}, y[4], rc, cls;
    what = "rejections";
    CHECK_MPI(MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN));
    rc = MPI_Allreduce(MPI_IN_PLACE, x, 4, MPI_INT, MPI_SUM, ic);
    MPI_Error_class(rc, &cls);
    CHECK(rc != MPI_SUCCESS && (cls == MPI_ERR_BUFFER || cls == MPI_ERR_ARG),
          "Allreduce with MPI_IN_PLACE on an intercommunicator: %d (class %d)", rc, cls);
    rc = MPI_Scan(x, y, 4, MPI_INT, MPI_SUM, ic);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COMM, "MPI_Scan on an intercommunicator: %d (class %d)", rc, cls);
    rc = MPI_Exscan(x, y, 4, MPI_INT, MPI_SUM, ic);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COMM, "MPI_Exscan on an intercommunicator: %d (class %d)", rc, cls);
    if (!no_neighbor) {
        rc = MPI_Neighbor_allgather(x, 1, MPI_INT, y, 1, MPI_INT, ic);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_COMM || cls == MPI_ERR_TOPOLOGY,
              "MPI_Neighbor_allgather on an intercommunicator: %d (class %d)", rc, cls);
    }
    CHECK_MPI(MPI_Comm_set_errhandler(ic, MPI_ERRORS_ARE_FATAL));
    /* the intercommunicator still works */
    t_barrier();
    t_allreduce(3, 99, 0);
}

static void run_all(long large)
{
    long counts[4];
    int ci, k = 0, rg, rr;
    counts[0] = 0;
    counts[1] = 1;
    counts[2] = 7;
    counts[3] = large;
    for (nonblock = 0; nonblock < 2; nonblock++) {
        t_barrier();
        for (ci = 0; ci < 4; ci++) {
            long n = counts[ci];
            /* per-block counts of the gathers and all-to-alls (the same in both groups):
             * >= 1 MiB per rank in all */
            int pq = p_me < q_rem ? p_me : q_rem;
            long nb = ci == 3 ? (large + pq - 1) / pq : n;
            for (rg = 0; rg < 2; rg++) {
                int gsize = rg == g_me ? p_me : q_rem;
                for (rr = 0; rr < gsize; rr += (gsize > 1 ? gsize - 1 : 1)) {
                    k++;
                    if (!(nonblock && no_ibcast))
                        t_bcast(n, k, rg, rr);
                    t_reduce(n, k, rg, rr);
                    t_gather(nb, k, rg, rr, 0);
                    t_gather(nb, k, rg, rr, 1);
                    t_scatter(nb, k, rg, rr, 0);
                    t_scatter(nb, k, rg, rr, 1);
                    if (ci < 3 && !(nonblock && no_ibcast))
                        t_bcast_vec(n, k, rg, rr);
                }
            }
            k++;
            t_allgather(nb, k, 0);
            t_allgather(nb, k, 1);
            t_alltoall(nb, k, 0);
            t_alltoall(nb, k, 1);
            t_alltoall(nb, k, 2);
            t_allreduce(n, k, 0);
            t_reduce_scatter(ci == 3 ? (large + p_me * q_rem - 1) / (p_me * q_rem) : n, k, 1);
            t_reduce_scatter(n, k, 0);
            if (ci < 3)
                t_allgather_vec(n, k);
        }
        t_barrier();
    }
    t_in_flight(++k);
    if (!no_rejections)
        t_rejected();
}

static void on_split(int color, long large)
{
    MPI_Comm local, merged;
    int wrank, wsize, i, remote_leader = -1, sum, expect = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, wrank, &local));
    /* the other group's leader: its lowest world rank */
    {
        int *colors = ialloc(wsize);
        CHECK_MPI(MPI_Allgather(&color, 1, MPI_INT, colors, 1, MPI_INT, MPI_COMM_WORLD));
        for (i = 0; i < wsize; i++)
            if (colors[i] != color) {
                remote_leader = i;
                break;
            }
        free(colors);
    }
    CHECK(remote_leader >= 0, "no other group");
    CHECK_MPI(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, remote_leader, 42, &ic));
    g_me = color;
    CHECK_MPI(MPI_Comm_rank(ic, &r_me));
    CHECK_MPI(MPI_Comm_size(ic, &p_me));
    CHECK_MPI(MPI_Comm_remote_size(ic, &q_rem));
    run_all(large);

    /* merged: group 0 first */
    CHECK_MPI(MPI_Intercomm_merge(ic, color, &merged));
    CHECK_MPI(MPI_Allreduce(&wrank, &sum, 1, MPI_INT, MPI_SUM, merged));
    for (i = 0; i < wsize; i++)
        expect += i;
    CHECK(sum == expect, "Allreduce on the merged communicator: %d, expected %d", sum, expect);
    CHECK_MPI(MPI_Comm_free(&merged));
    CHECK_MPI(MPI_Comm_free(&ic));
    CHECK_MPI(MPI_Comm_free(&local));
}

int main(int argc, char **argv)
{
    int rank, size, first, i;
    long large = 262144;

    MPI_Init(&argc, &argv);
    test_begin("intercoll");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-ibcast") == 0)
            no_ibcast = 1;
        else if (strcmp(argv[i], "--no-rejections") == 0)
            no_rejections = 1;
        else if (strcmp(argv[i], "--no-neighbor") == 0)
            no_neighbor = 1;
        else
            large = atol(argv[i]);
    }
    if (no_ibcast && rank == 0)
        printf("note: MPI_Ibcast on an intercommunicator skipped\n");
    if (no_neighbor && rank == 0)
        printf("note: MPI_Neighbor_allgather on an intercommunicator skipped\n");
    if (no_rejections && rank == 0)
        printf("note: MPI_IN_PLACE and MPI_Scan rejections on an intercommunicator skipped\n");
    CHECK(size >= 2, "needs at least 2 processes");
    {
        /* two ints with a hole between and one after: extent four ints */
        MPI_Datatype v2;
        CHECK_MPI(MPI_Type_vector(2, 1, 2, MPI_INT, &v2));
        CHECK_MPI(MPI_Type_create_resized(v2, 0, 4 * (MPI_Aint)sizeof(int), &vec));
        CHECK_MPI(MPI_Type_commit(&vec));
        CHECK_MPI(MPI_Type_free(&v2));
    }

    /* a leading block of about a third (at least one) and the rest */
    first = size / 3 > 0 ? size / 3 : 1;
    on_split(rank < first ? 0 : 1, large);
    /* odd and even world ranks (group 0: the odd ones, so that its leader is world rank 1) */
    on_split(rank % 2 == 1 ? 0 : 1, large);

    CHECK_MPI(MPI_Type_free(&vec));
    return test_end();
}
