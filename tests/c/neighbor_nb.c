/*
 * neighbor_nb.c - non-blocking, persistent and large-count neighbourhood collectives against
 * the blocking int forms.
 *
 * On a periodic ring (at 2 ranks both neighbours are one peer), a 2-D grid periodic in its
 * first dimension only (MPI_PROC_NULL neighbours), and a distributed graph (each rank to
 * rank+1 and rank+2, unweighted): MPI_Ineighbor_allgather(v)/alltoall(v/w), their _init forms
 * (started three times with new data, by MPI_Start and MPI_Startall) and the _c forms (blocking,
 * non-blocking, persistent) give the bytes the blocking MPI_Neighbor_* call gives; holes
 * between blocks stay untouched. Two non-blocking ones are in flight at once.
 */
#include "stormtest.h"

#include <string.h>

#define M 3
#define MAXN 16
#define CAP 512

static int rank, size;
static int sbuf[CAP], want[CAP], got[CAP], got2[CAP];
static int sc[MAXN], sd[MAXN], rc[MAXN], rd[MAXN];
static MPI_Count csc[MAXN], crc[MAXN];
static MPI_Aint csd[MAXN], crd[MAXN], swd[MAXN], rwd[MAXN];
static MPI_Datatype ts[MAXN];

static void refill(int round)
{
    for (int i = 0; i < CAP; i++) {
        sbuf[i] = rank * 100000 + round * 1000 + i;
        want[i] = got[i] = got2[i] = -1;
    }
}

static void counts(int indeg, int outdeg)
{
    int at = 0;
    for (int i = 0; i < outdeg; i++) {
        sc[i] = (i / 2) % 3 + 1; /* both directions of a dimension alike */
        sd[i] = at;
        at += sc[i] + 1;
        csc[i] = sc[i]; csd[i] = sd[i]; swd[i] = sd[i] * (MPI_Aint)sizeof(int);
        ts[i] = MPI_INT;
    }
    at = 0;
    for (int j = 0; j < indeg; j++) {
        rc[j] = 0; /* set from the senders' formula below */
        rd[j] = at + 1;
        at += 5;
        crd[j] = rd[j]; rwd[j] = rd[j] * (MPI_Aint)sizeof(int);
    }
}

/* The blocking int form of `op` into `out`. */
static void blocking(MPI_Comm c, int op, int *out)
{
    switch (op) {
    case 0: CHECK_MPI(MPI_Neighbor_allgather(sbuf, M, MPI_INT, out, M, MPI_INT, c)); break;
    case 1: CHECK_MPI(MPI_Neighbor_allgatherv(sbuf, M, MPI_INT, out, rc, rd, MPI_INT, c)); break;
    case 2: CHECK_MPI(MPI_Neighbor_alltoall(sbuf, M, MPI_INT, out, M, MPI_INT, c)); break;
    case 3: CHECK_MPI(MPI_Neighbor_alltoallv(sbuf, sc, sd, MPI_INT, out, rc, rd, MPI_INT, c)); break;
    default: CHECK_MPI(MPI_Neighbor_alltoallw(sbuf, sc, swd, ts, out, rc, rwd, ts, c)); break;
    }
}

/* Form `form` of `op` into `out`: 0 I, 1 I_c, 2 blocking _c; or makes its persistent request
 * (3 _init, 4 _init_c) in `*req`. */
static void other(MPI_Comm c, int op, int form, int *out, MPI_Request *req)
{
    MPI_Info in = MPI_INFO_NULL;
    switch (op * 10 + form) {
    case 0: CHECK_MPI(MPI_Ineighbor_allgather(sbuf, M, MPI_INT, out, M, MPI_INT, c, req)); break;
    case 1: CHECK_MPI(MPI_Ineighbor_allgather_c(sbuf, M, MPI_INT, out, M, MPI_INT, c, req)); break;
    case 2: CHECK_MPI(MPI_Neighbor_allgather_c(sbuf, M, MPI_INT, out, M, MPI_INT, c)); break;
    case 3: CHECK_MPI(MPI_Neighbor_allgather_init(sbuf, M, MPI_INT, out, M, MPI_INT, c, in, req)); break;
    case 4: CHECK_MPI(MPI_Neighbor_allgather_init_c(sbuf, M, MPI_INT, out, M, MPI_INT, c, in, req)); break;
    case 10: CHECK_MPI(MPI_Ineighbor_allgatherv(sbuf, M, MPI_INT, out, rc, rd, MPI_INT, c, req)); break;
    case 11: CHECK_MPI(MPI_Ineighbor_allgatherv_c(sbuf, M, MPI_INT, out, crc, crd, MPI_INT, c, req)); break;
    case 12: CHECK_MPI(MPI_Neighbor_allgatherv_c(sbuf, M, MPI_INT, out, crc, crd, MPI_INT, c)); break;
    case 13: CHECK_MPI(MPI_Neighbor_allgatherv_init(sbuf, M, MPI_INT, out, rc, rd, MPI_INT, c, in, req)); break;
    case 14: CHECK_MPI(MPI_Neighbor_allgatherv_init_c(sbuf, M, MPI_INT, out, crc, crd, MPI_INT, c, in, req)); break;
    case 20: CHECK_MPI(MPI_Ineighbor_alltoall(sbuf, M, MPI_INT, out, M, MPI_INT, c, req)); break;
    case 21: CHECK_MPI(MPI_Ineighbor_alltoall_c(sbuf, M, MPI_INT, out, M, MPI_INT, c, req)); break;
    case 22: CHECK_MPI(MPI_Neighbor_alltoall_c(sbuf, M, MPI_INT, out, M, MPI_INT, c)); break;
    case 23: CHECK_MPI(MPI_Neighbor_alltoall_init(sbuf, M, MPI_INT, out, M, MPI_INT, c, in, req)); break;
    case 24: CHECK_MPI(MPI_Neighbor_alltoall_init_c(sbuf, M, MPI_INT, out, M, MPI_INT, c, in, req)); break;
    case 30: CHECK_MPI(MPI_Ineighbor_alltoallv(sbuf, sc, sd, MPI_INT, out, rc, rd, MPI_INT, c, req)); break;
    case 31: CHECK_MPI(MPI_Ineighbor_alltoallv_c(sbuf, csc, csd, MPI_INT, out, crc, crd, MPI_INT, c, req)); break;
    case 32: CHECK_MPI(MPI_Neighbor_alltoallv_c(sbuf, csc, csd, MPI_INT, out, crc, crd, MPI_INT, c)); break;
    case 33: CHECK_MPI(MPI_Neighbor_alltoallv_init(sbuf, sc, sd, MPI_INT, out, rc, rd, MPI_INT, c, in, req)); break;
    case 34: CHECK_MPI(MPI_Neighbor_alltoallv_init_c(sbuf, csc, csd, MPI_INT, out, crc, crd, MPI_INT, c, in, req)); break;
    case 40: CHECK_MPI(MPI_Ineighbor_alltoallw(sbuf, sc, swd, ts, out, rc, rwd, ts, c, req)); break;
    case 41: CHECK_MPI(MPI_Ineighbor_alltoallw_c(sbuf, csc, swd, ts, out, crc, rwd, ts, c, req)); break;
    case 42: CHECK_MPI(MPI_Neighbor_alltoallw_c(sbuf, csc, swd, ts, out, crc, rwd, ts, c)); break;
    case 43: CHECK_MPI(MPI_Neighbor_alltoallw_init(sbuf, sc, swd, ts, out, rc, rwd, ts, c, in, req)); break;
    default: CHECK_MPI(MPI_Neighbor_alltoallw_init_c(sbuf, csc, swd, ts, out, crc, rwd, ts, c, in, req)); break;
    }
}

static void same(const int *a, const int *b, const char *topo, int op, int form, int round)
{
    for (int i = 0; i < CAP; i++)
        CHECK(a[i] == b[i], "%s: op %d form %d round %d: element %d is %d, blocking gave %d", topo, op, form, round, i, a[i], b[i]);
}

/* Every in-neighbour sends rc[j] ints: for allgatherv M, for alltoallv/w the sender's sc[slot]
 * of that edge; the test's topologies make slot-for-slot symmetric edges, so rc[j] = sc[j]. */
static void run(MPI_Comm c, const char *topo, int indeg, int outdeg)
{
    counts(indeg, outdeg);
    for (int op = 0; op < 5; op++) {
        for (int j = 0; j < indeg; j++) {
            rc[j] = (op == 1) ? M : sc[j];
            crc[j] = rc[j];
        }
        /* Non-blocking and blocking _c forms, two in flight at once. */
        for (int form = 0; form < 3; form++) {
            MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
            refill(form);
            blocking(c, op, want);
            other(c, op, form, got, &r[0]);
            if (form < 2) {
                other(c, op, form, got2, &r[1]);
                CHECK_MPI(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
                same(got2, want, topo, op, form, 0);
            }
            same(got, want, topo, op, form, 0);
        }
        /* Persistent: three starts each, new data each time. */
        for (int form = 3; form < 5; form++) {
            MPI_Request r;
            other(c, op, form, got, &r);
            for (int round = 0; round < 3; round++) {
                refill(10 + round);
                blocking(c, op, want);
                if (round == 1)
                    CHECK_MPI(MPI_Startall(1, &r));
                else
                    CHECK_MPI(MPI_Start(&r));
                CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
                same(got, want, topo, op, form, round);
            }
            CHECK_MPI(MPI_Request_free(&r));
        }
    }
}

int main(int argc, char **argv)
{
    MPI_Comm ring, grid, graph;
    int dims[2] = {0, 0}, periods[2] = {1, 0}, one = 1;
    MPI_Init(&argc, &argv);
    test_begin("neighbor_nb");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 1, &size, &one, 0, &ring));
    run(ring, "ring", 2, 2);
    CHECK_MPI(MPI_Comm_free(&ring));

    CHECK_MPI(MPI_Dims_create(size, 2, dims));
    CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid));
    run(grid, "grid", 4, 4);
    CHECK_MPI(MPI_Comm_free(&grid));

    {
        /* rank -> rank+1, rank+2; so in-neighbours rank-1, rank-2. The alltoallv counts are
         * per slot: out slot s carries sc[s] and in slot s expects sc[s] (same formula). */
        int dst[2] = {(rank + 1) % size, (rank + 2) % size};
        int src[2] = {(rank + size - 1) % size, (rank + size - 2) % size};
        CHECK_MPI(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, src, MPI_UNWEIGHTED, 2, dst,
                                                 MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &graph));
        run(graph, "graph", 2, 2);
        CHECK_MPI(MPI_Comm_free(&graph));
    }
    return test_end();
}
