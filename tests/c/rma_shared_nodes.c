/*
 * rma_shared_nodes.c - shared windows where memory cannot be shared: run on the node build
 * (whose platform has no shared segments) with two ranks on each of two nodes.
 *
 * MPI_Win_allocate_shared over processes of two nodes is MPI_ERR_RMA_SHARED; over the two
 * processes of one node too (no shared memory on this platform), and the error text says why;
 * over MPI_COMM_SELF it works. MPI_Win_allocate works over both (the node communicator falls back
 * to the engine's memory): puts and accumulates under fences arrive.
 */
#include "stormtest.h"

static void expect_shared_error(MPI_Comm comm, const char *what, const char *says)
{
    int *mem = NULL;
    MPI_Win win = MPI_WIN_NULL;
    int rc = MPI_Win_allocate_shared(64, 1, MPI_INFO_NULL, comm, &mem, &win);
    int cls = -1, len = 0;
    char text[MPI_MAX_ERROR_STRING] = "";
    MPI_Error_class(rc, &cls);
    MPI_Error_string(rc, text, &len);
    CHECK(cls == MPI_ERR_RMA_SHARED, "%s: class %d (%s), not MPI_ERR_RMA_SHARED", what, cls, text);
    CHECK(strstr(text, says) != NULL, "%s: the message '%s' does not say '%s'", what, text, says);
    CHECK(win == MPI_WIN_NULL, "%s: a window handle came back", what);
}

static void allocate_works(MPI_Comm comm)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    long *mem;
    MPI_Win win;
    CHECK_MPI(MPI_Win_allocate((size + 1) * sizeof(long), sizeof(long), MPI_INFO_NULL, comm, &mem,
                               &win));
    for (int i = 0; i <= size; i++)
        mem[i] = 0;
    CHECK_MPI(MPI_Win_fence(0, win));
    long v = 10 + rank, one = 1;
    for (int r = 0; r < size; r++) {
        CHECK_MPI(MPI_Put(&v, 1, MPI_LONG, r, 1 + rank, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Accumulate(&one, 1, MPI_LONG, r, 0, 1, MPI_LONG, MPI_SUM, win));
    }
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK(mem[0] == size, "accumulated %ld, not %d", mem[0], size);
    for (int r = 0; r < size; r++)
        CHECK(mem[1 + r] == 10 + r, "put from %d: %ld", r, mem[1 + r]);
    CHECK_MPI(MPI_Win_free(&win));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("rma_shared_nodes");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Comm node;
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    CHECK_MPI(MPI_Comm_set_errhandler(node, MPI_ERRORS_RETURN));
    int nsize, wsize;
    MPI_Comm_size(node, &nsize);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    CHECK(nsize == 2 && wsize == 4, "run with two ranks on each of two nodes (%d of %d)", nsize,
          wsize);

    expect_shared_error(MPI_COMM_WORLD, "two nodes", "not all on one node");
    expect_shared_error(node, "one node without shared memory", "no memory shared");

    double *d;
    MPI_Win self;
    CHECK_MPI(MPI_Win_allocate_shared(2 * sizeof(double), sizeof(double), MPI_INFO_NULL,
                                      MPI_COMM_SELF, &d, &self));
    d[1] = 2.5;
    MPI_Aint sz;
    int du;
    double *q;
    CHECK_MPI(MPI_Win_shared_query(self, 0, &sz, &du, &q));
    CHECK(q == d && q[1] == 2.5 && sz == 2 * (MPI_Aint)sizeof(double), "a window of one process");
    CHECK_MPI(MPI_Win_free(&self));

    allocate_works(MPI_COMM_WORLD);
    allocate_works(node);

    CHECK_MPI(MPI_Comm_free(&node));
    return test_end();
}
