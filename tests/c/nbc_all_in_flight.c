/*
 * nbc_all_in_flight.c - every kind of non-blocking collective posted on one communicator, with
 * and without MPI_IN_PLACE, all in flight together, then completed by one MPI_Waitall.
 *
 * Checked: Ibarrier, Ibcast, Igather(v), Iscatter(v), Iallgather(v), Ialltoall(v/w), Ireduce,
 * Iallreduce, Ireduce_scatter, Ireduce_scatter_block, Iscan, Iexscan (each also in place where
 * the standard allows it, except Ireduce_scatter, with the arguments the standard then ignores
 * passed as -1, MPI_DATATYPE_NULL or NULL), about 30 requests posted back to back on
 * MPI_COMM_WORLD and a duplicate, for counts 1, 7 and 300 ints per block, then one Waitall;
 * every result against values computed locally. Repeated a few rounds.
 *
 * usage: nbc_all_in_flight [rounds]
 */
#include "stormtest.h"

#define MAXREQ 64

static int rank, size;
static MPI_Request reqs[MAXREQ];
static int nreq;
static void *bufs[4 * MAXREQ];
static int nbufs;

static int v(int r, int k, int salt)
{
    return (r * 131 + k * 17 + salt * 7) % 1000;
}

static int *ints(long n)
{
    int *p = test_malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    CHECK(nbufs < 4 * MAXREQ, "too many buffers");
    bufs[nbufs++] = p;
    return p;
}

static MPI_Request *next_req(void)
{
    CHECK(nreq < MAXREQ, "too many requests");
    return &reqs[nreq++];
}

/* What to check once everything completed. */
typedef struct {
    int kind;
    int inplace;
    int salt;
    int c;
    int root;
    int *buf;
} job;

enum { BCAST, REDUCE, ALLREDUCE, GATHER, GATHERV, SCATTER, SCATTERV, ALLGATHER, ALLGATHERV,
       ALLTOALL, ALLTOALLV, ALLTOALLW, RSCAT, RSCAT_BLOCK, SCAN, EXSCAN };

static job jobs[MAXREQ];
static int njobs;

static void expect(int kind, int inplace, int salt, int c, int root, int *buf)
{
    job j = {kind, inplace, salt, c, root, buf};
    CHECK(njobs < MAXREQ, "too many jobs");
    jobs[njobs++] = j;
}

/* The sum over ranks lo..hi-1 of v(r, k, salt). */
static int vsum(int lo, int hi, int k, int salt)
{
    int s = 0, r;
    for (r = lo; r < hi; r++)
        s += v(r, k, salt);
    return s;
}

static void post(MPI_Comm comm, int c, int inplace, int salt0)
{
    int i, j, salt = salt0;
    int n = size;
    int *counts = ints(n), *displs = ints(n), *bdispls = ints(n);
    MPI_Datatype *types = test_malloc((size_t)n * sizeof(MPI_Datatype));
    bufs[nbufs++] = types;
    for (i = 0; i < n; i++) {
        counts[i] = c;
        displs[i] = i * c;
        bdispls[i] = i * c * (int)sizeof(int);
        types[i] = MPI_INT;
    }

    CHECK_MPI(MPI_Ibarrier(comm, next_req()));

    /* Ibcast (root rotates with the salt) */
    {
        int root = salt % n, *b = ints(c);
        for (i = 0; i < c; i++)
            b[i] = rank == root ? v(root, i, salt) : -1;
        CHECK_MPI(MPI_Ibcast(b, c, MPI_INT, root, comm, next_req()));
        expect(BCAST, 0, salt, c, root, b);
        salt++;
    }
    /* Ireduce */
    {
        int root = salt % n, *s = ints(c), *r = ints(c);
        for (i = 0; i < c; i++)
            s[i] = r[i] = v(rank, i, salt);
        CHECK_MPI(MPI_Ireduce(inplace && rank == root ? MPI_IN_PLACE : s, r, c, MPI_INT,
                              MPI_SUM, root, comm, next_req()));
        expect(REDUCE, inplace, salt, c, root, r);
        salt++;
    }
    /* Iallreduce */
    {
        int *s = ints(c), *r = ints(c);
        for (i = 0; i < c; i++)
            s[i] = r[i] = v(rank, i, salt);
        CHECK_MPI(MPI_Iallreduce(inplace ? MPI_IN_PLACE : s, r, c, MPI_INT, MPI_SUM, comm,
                                 next_req()));
        expect(ALLREDUCE, inplace, salt, c, 0, r);
        salt++;
    }
    /* Igather */
    {
        int root = salt % n, *s = ints(c), *r = ints((long)n * c);
        for (i = 0; i < c; i++)
            s[i] = v(rank, i, salt);
        for (i = 0; i < n * c; i++)
            r[i] = -1;
        if (rank == root && inplace)
            memcpy(r + root * c, s, (size_t)c * sizeof(int));
        if (inplace && rank == root) /* the send arguments are ignored: pass nonsense */
            CHECK_MPI(MPI_Igather(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, r, c, MPI_INT, root, comm,
                                  next_req()));
        else
            CHECK_MPI(MPI_Igather(s, c, MPI_INT, r, c, MPI_INT, root, comm, next_req()));
        expect(GATHER, inplace, salt, c, root, r);
        salt++;
    }
    /* Igatherv */
    {
        int root = salt % n, *s = ints(c), *r = ints((long)n * c);
        for (i = 0; i < c; i++)
            s[i] = v(rank, i, salt);
        for (i = 0; i < n * c; i++)
            r[i] = -1;
        if (rank == root && inplace)
            memcpy(r + root * c, s, (size_t)c * sizeof(int));
        if (inplace && rank == root)
            CHECK_MPI(MPI_Igatherv(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, r, counts, displs,
                                   MPI_INT, root, comm, next_req()));
        else
            CHECK_MPI(MPI_Igatherv(s, c, MPI_INT, r, counts, displs, MPI_INT, root, comm,
                                   next_req()));
        expect(GATHERV, inplace, salt, c, root, r);
        salt++;
    }
    /* Iscatter */
    {
        int root = salt % n, *s = ints((long)n * c), *r = ints((long)n * c);
        for (j = 0; j < n; j++)
            for (i = 0; i < c; i++)
                s[j * c + i] = v(j, i, salt);
        for (i = 0; i < n * c; i++)
            r[i] = -1;
        if (inplace && rank == root) {
            CHECK_MPI(MPI_Iscatter(s, c, MPI_INT, MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, root,
                                   comm, next_req()));
            expect(SCATTER, 1, salt, c, root, s + root * c);
        } else {
            CHECK_MPI(MPI_Iscatter(s, c, MPI_INT, r, c, MPI_INT, root, comm, next_req()));
            expect(SCATTER, 0, salt, c, root, r);
        }
        salt++;
    }
    /* Iscatterv */
    {
        int root = salt % n, *s = ints((long)n * c), *r = ints((long)n * c);
        for (j = 0; j < n; j++)
            for (i = 0; i < c; i++)
                s[j * c + i] = v(j, i, salt);
        for (i = 0; i < n * c; i++)
            r[i] = -1;
        if (inplace && rank == root) {
            CHECK_MPI(MPI_Iscatterv(s, counts, displs, MPI_INT, MPI_IN_PLACE, -1,
                                    MPI_DATATYPE_NULL, root, comm, next_req()));
            expect(SCATTERV, 1, salt, c, root, s + root * c);
        } else {
            CHECK_MPI(MPI_Iscatterv(s, counts, displs, MPI_INT, r, c, MPI_INT, root, comm,
                                    next_req()));
            expect(SCATTERV, 0, salt, c, root, r);
        }
        salt++;
    }
    /* Iallgather, Iallgatherv */
    for (j = 0; j < 2; j++) {
        int *s = ints(c), *r = ints((long)n * c);
        for (i = 0; i < c; i++)
            s[i] = v(rank, i, salt);
        for (i = 0; i < n * c; i++)
            r[i] = -1;
        if (inplace)
            memcpy(r + rank * c, s, (size_t)c * sizeof(int));
        if (j == 0)
            CHECK_MPI(MPI_Iallgather(inplace ? MPI_IN_PLACE : s, inplace ? -1 : c,
                                     inplace ? MPI_DATATYPE_NULL : MPI_INT, r, c, MPI_INT, comm,
                                     next_req()));
        else
            CHECK_MPI(MPI_Iallgatherv(inplace ? MPI_IN_PLACE : s, inplace ? -1 : c,
                                      inplace ? MPI_DATATYPE_NULL : MPI_INT, r, counts, displs,
                                      MPI_INT, comm, next_req()));
        expect(j == 0 ? ALLGATHER : ALLGATHERV, inplace, salt, c, 0, r);
        salt++;
    }
    /* Ialltoall, Ialltoallv, Ialltoallw: block j of rank r's input is v(r, j * c + i) */
    for (j = 0; j < 3; j++) {
        int *s = ints((long)n * c), *r = ints((long)n * c), k;
        for (k = 0; k < n * c; k++)
            s[k] = v(rank, k, salt);
        if (inplace)
            memcpy(r, s, (size_t)n * c * sizeof(int));
        else
            for (k = 0; k < n * c; k++)
                r[k] = -1;
        if (j == 0)
            CHECK_MPI(MPI_Ialltoall(inplace ? MPI_IN_PLACE : s, inplace ? -1 : c,
                                    inplace ? MPI_DATATYPE_NULL : MPI_INT, r, c, MPI_INT, comm,
                                    next_req()));
        else if (j == 1)
            CHECK_MPI(MPI_Ialltoallv(inplace ? MPI_IN_PLACE : s, inplace ? NULL : counts,
                                     inplace ? NULL : displs,
                                     inplace ? MPI_DATATYPE_NULL : MPI_INT, r, counts, displs,
                                     MPI_INT, comm, next_req()));
        else
            CHECK_MPI(MPI_Ialltoallw(inplace ? MPI_IN_PLACE : s, inplace ? NULL : counts,
                                     inplace ? NULL : bdispls, inplace ? NULL : types, r, counts,
                                     bdispls, types, comm, next_req()));
        expect(ALLTOALL + j, inplace, salt, c, 0, r);
        salt++;
    }
    /* Ireduce_scatter (not in place: another test covers that), Ireduce_scatter_block */
    {
        int *s = ints((long)n * c), *r = ints((long)n * c), k;
        for (k = 0; k < n * c; k++)
            s[k] = v(rank, k, salt);
        for (k = 0; k < n * c; k++)
            r[k] = -1;
        CHECK_MPI(MPI_Ireduce_scatter(s, r, counts, MPI_INT, MPI_SUM, comm, next_req()));
        expect(RSCAT, 0, salt, c, 0, r);
        salt++;
    }
    {
        int *s = ints((long)n * c), *r = ints((long)n * c), k;
        for (k = 0; k < n * c; k++)
            s[k] = r[k] = v(rank, k, salt);
        CHECK_MPI(MPI_Ireduce_scatter_block(inplace ? MPI_IN_PLACE : s, r, c, MPI_INT, MPI_SUM,
                                            comm, next_req()));
        expect(RSCAT_BLOCK, inplace, salt, c, 0, r);
        salt++;
    }
    /* Iscan, Iexscan */
    for (j = 0; j < 2; j++) {
        int *s = ints(c), *r = ints(c);
        for (i = 0; i < c; i++)
            s[i] = r[i] = v(rank, i, salt);
        if (j == 0)
            CHECK_MPI(MPI_Iscan(inplace ? MPI_IN_PLACE : s, r, c, MPI_INT, MPI_SUM, comm,
                                next_req()));
        else
            CHECK_MPI(MPI_Iexscan(inplace ? MPI_IN_PLACE : s, r, c, MPI_INT, MPI_SUM, comm,
                                  next_req()));
        expect(j == 0 ? SCAN : EXSCAN, inplace, salt, c, 0, r);
        salt++;
    }
}

static void verify(const job *jb)
{
    int i, j, c = jb->c, salt = jb->salt, n = size;
    const int *b = jb->buf;
    switch (jb->kind) {
    case BCAST:
        for (i = 0; i < c; i++)
            CHECK(b[i] == v(jb->root, i, salt), "Ibcast c=%d [%d] = %d, expected %d", c, i, b[i],
                  v(jb->root, i, salt));
        break;
    case REDUCE:
        if (rank == jb->root)
            for (i = 0; i < c; i++)
                CHECK(b[i] == vsum(0, n, i, salt), "Ireduce%s c=%d [%d] = %d, expected %d",
                      jb->inplace ? " in place" : "", c, i, b[i], vsum(0, n, i, salt));
        break;
    case ALLREDUCE:
        for (i = 0; i < c; i++)
            CHECK(b[i] == vsum(0, n, i, salt), "Iallreduce%s c=%d [%d] = %d, expected %d",
                  jb->inplace ? " in place" : "", c, i, b[i], vsum(0, n, i, salt));
        break;
    case GATHER:
    case GATHERV:
        if (rank == jb->root)
            for (j = 0; j < n; j++)
                for (i = 0; i < c; i++)
                    CHECK(b[j * c + i] == v(j, i, salt),
                          "Igather%s%s c=%d block %d [%d] = %d, expected %d",
                          jb->kind == GATHERV ? "v" : "", jb->inplace ? " in place" : "", c, j,
                          i, b[j * c + i], v(j, i, salt));
        break;
    case SCATTER:
    case SCATTERV:
        for (i = 0; i < c; i++)
            CHECK(b[i] == v(rank, i, salt), "Iscatter%s%s c=%d [%d] = %d, expected %d",
                  jb->kind == SCATTERV ? "v" : "", jb->inplace ? " in place" : "", c, i, b[i],
                  v(rank, i, salt));
        break;
    case ALLGATHER:
    case ALLGATHERV:
        for (j = 0; j < n; j++)
            for (i = 0; i < c; i++)
                CHECK(b[j * c + i] == v(j, i, salt),
                      "Iallgather%s%s c=%d block %d [%d] = %d, expected %d",
                      jb->kind == ALLGATHERV ? "v" : "", jb->inplace ? " in place" : "", c, j, i,
                      b[j * c + i], v(j, i, salt));
        break;
    case ALLTOALL:
    case ALLTOALLV:
    case ALLTOALLW:
        /* block j comes from rank j: its block number `rank` */
        for (j = 0; j < n; j++)
            for (i = 0; i < c; i++)
                CHECK(b[j * c + i] == v(j, rank * c + i, salt),
                      "Ialltoall%s%s c=%d block %d [%d] = %d, expected %d",
                      jb->kind == ALLTOALL ? "" : jb->kind == ALLTOALLV ? "v" : "w",
                      jb->inplace ? " in place" : "", c, j, i, b[j * c + i],
                      v(j, rank * c + i, salt));
        break;
    case RSCAT:
    case RSCAT_BLOCK:
        for (i = 0; i < c; i++)
            CHECK(b[i] == vsum(0, n, rank * c + i, salt),
                  "Ireduce_scatter%s%s c=%d [%d] = %d, expected %d",
                  jb->kind == RSCAT_BLOCK ? "_block" : "", jb->inplace ? " in place" : "", c, i,
                  b[i], vsum(0, n, rank * c + i, salt));
        break;
    case SCAN:
        for (i = 0; i < c; i++)
            CHECK(b[i] == vsum(0, rank + 1, i, salt), "Iscan%s c=%d [%d] = %d, expected %d",
                  jb->inplace ? " in place" : "", c, i, b[i], vsum(0, rank + 1, i, salt));
        break;
    case EXSCAN:
        if (rank > 0)
            for (i = 0; i < c; i++)
                CHECK(b[i] == vsum(0, rank, i, salt), "Iexscan%s c=%d [%d] = %d, expected %d",
                      jb->inplace ? " in place" : "", c, i, b[i], vsum(0, rank, i, salt));
        break;
    default:
        FAIL("unknown job kind %d", jb->kind);
    }
}

int main(int argc, char **argv)
{
    static const int counts[] = {1, 7, 300};
    int rounds = argc > 1 ? atoi(argv[1]) : 3, round, ci, k;
    MPI_Comm dup;
    MPI_Init(&argc, &argv);
    test_begin("nbc_all_in_flight");
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));

    for (round = 0; round < rounds; round++)
        for (ci = 0; ci < 3; ci++) {
            MPI_Comm comm = (round + ci) % 2 ? dup : MPI_COMM_WORLD;
            nreq = njobs = nbufs = 0;
            /* both forms on one communicator, all in flight together */
            post(comm, counts[ci], 0, round * 100 + ci * 40);
            post(comm, counts[ci], 1, round * 100 + ci * 40 + 20);
            CHECK_MPI(MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE));
            for (k = 0; k < nreq; k++)
                CHECK(reqs[k] == MPI_REQUEST_NULL, "request %d not MPI_REQUEST_NULL", k);
            for (k = 0; k < njobs; k++)
                verify(&jobs[k]);
            for (k = 0; k < nbufs; k++)
                free(bufs[k]);
        }

    CHECK_MPI(MPI_Comm_free(&dup));
    return test_end();
}
