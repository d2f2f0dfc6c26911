/*
 * reduce_user.c - user-defined reductions whose function calls MPI, as mpi4py's do (they ask
 * for the datatype's extent and size), under MPI_THREAD_MULTIPLE when the library provides it
 * (issue 27: MPI_Allreduce with such an operation hung at 2 ranks, waiting for a lock its own
 * thread held): Allreduce of 0-3 ints on MPI_COMM_SELF and MPI_COMM_WORLD, commutative or not
 * (mpi4py's test_op), Reduce to every root, Iallreduce, Reduce_local; then an in-place
 * Ireduce_scatter with counts 1..size (mpi4py's test_cco_nb_buf) for several types and
 * operations, the part of the buffer past this rank's block left as it was.  Last, 5,000 user
 * operations alive at once (neither Open MPI nor MPICH has a small limit), each one used.
 */
#include "stormtest.h"

static int calls;

static void mysum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    MPI_Aint lb = -1, extent = -1;
    int size = -1, i;
    CHECK_MPI(MPI_Type_get_extent(*dt, &lb, &extent));
    CHECK_MPI(MPI_Type_size(*dt, &size));
    CHECK(lb == 0 && extent == (MPI_Aint)sizeof(int) && size == (int)sizeof(int),
          "in the user function: MPI_INT has lb %ld extent %ld size %d", (long)lb, (long)extent,
          size);
    for (i = 0; i < *len; i++)
        ((int *)inout)[i] += ((const int *)in)[i];
    calls++;
}

static void user_ops(void)
{
    int size, rank, c, commute, n, root, i;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (c = 0; c < 2; c++) {
        MPI_Comm comm = c ? MPI_COMM_WORLD : MPI_COMM_SELF;
        int csize = c ? size : 1, scale = c ? size * (size + 1) / 2 : rank + 1;
        for (commute = 1; commute >= 0; commute--) {
            for (n = 0; n < 4; n++) {
                MPI_Op op;
                int a[3], b[3] = {-1, -1, -1};
                MPI_Request req;
                CHECK_MPI(MPI_Op_create(mysum, commute, &op));
                for (i = 0; i < n; i++)
                    a[i] = i * (rank + 1);
                CHECK_MPI(MPI_Allreduce(a, b, n, MPI_INT, op, comm));
                for (i = 0; i < n; i++)
                    CHECK(b[i] == scale * i, "Allreduce(comm %d, commute %d, n %d)[%d] = %d, "
                          "expected %d", c, commute, n, i, b[i], scale * i);
                for (root = 0; root < csize; root++) {
                    b[0] = b[1] = b[2] = -1;
                    CHECK_MPI(MPI_Reduce(a, b, n, MPI_INT, op, root, comm));
                    if ((c ? rank : 0) == root)
                        for (i = 0; i < n; i++)
                            CHECK(b[i] == scale * i, "Reduce(root %d, n %d)[%d] = %d", root, n,
                                  i, b[i]);
                }
                b[0] = b[1] = b[2] = -1;
                CHECK_MPI(MPI_Iallreduce(a, b, n, MPI_INT, op, comm, &req));
                CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
                for (i = 0; i < n; i++)
                    CHECK(b[i] == scale * i, "Iallreduce(n %d)[%d] = %d", n, i, b[i]);
                for (i = 0; i < n; i++)
                    b[i] = 1;
                CHECK_MPI(MPI_Reduce_local(a, b, n, MPI_INT, op));
                for (i = 0; i < n; i++)
                    CHECK(b[i] == a[i] + 1, "Reduce_local[%d] = %d", i, b[i]);
                CHECK_MPI(MPI_Op_free(&op));
            }
        }
    }
    CHECK(size == 1 || calls > 0, "the user function was never called");
}

/* In place: each rank starts with `init` everywhere; block r (counts[r] = r + 1 elements)
   ends at rank r as the reduction, and the rest of rank r's buffer stays `init`. */
#define IRS(CT, MT)                                                                            \
    do {                                                                                       \
        MPI_Op ops[4] = {MPI_SUM, MPI_MAX, MPI_MIN, MPI_PROD};                                 \
        int o, k, total = size * (size + 1) / 2;                                               \
        for (o = 0; o < 4; o++) {                                                              \
            CT *buf = test_malloc(sizeof(CT) * (size_t)total), init, want = 0;                 \
            MPI_Request req;                                                                   \
            init = (CT)(o == 3 ? rank + 1 : rank);                                             \
            for (k = 0; k < total; k++)                                                        \
                buf[k] = init;                                                                 \
            CHECK_MPI(MPI_Ireduce_scatter(MPI_IN_PLACE, buf, counts, MT, ops[o],               \
                                          MPI_COMM_WORLD, &req));                              \
            CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));                                      \
            if (o == 0)                                                                        \
                want = (CT)(size * (size - 1) / 2);                                            \
            else if (o == 1)                                                                   \
                want = (CT)(size - 1);                                                         \
            else if (o == 2)                                                                   \
                want = (CT)0;                                                                  \
            else                                                                               \
                for (want = 1, k = 2; k <= size; k++)                                          \
                    want = (CT)(want * k);                                                     \
            for (k = 0; k < total; k++) {                                                      \
                CT w = k < counts[rank] ? want : init;                                         \
                CHECK(buf[k] == w, "in-place Ireduce_scatter of %s with op %d: element %d is " \
                      "%g, expected %g", #MT, o, k, (double)buf[k], (double)w);                \
            }                                                                                  \
            free(buf);                                                                         \
        }                                                                                      \
    } while (0)

static void ireduce_scatter_in_place(void)
{
    int size, rank, i, *counts;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    counts = test_malloc(sizeof(int) * (size_t)size);
    for (i = 0; i < size; i++)
        counts[i] = i + 1;
    IRS(signed char, MPI_SIGNED_CHAR);
    IRS(short, MPI_SHORT);
    IRS(int, MPI_INT);
    IRS(long, MPI_LONG);
    IRS(long long, MPI_LONG_LONG);
    IRS(unsigned, MPI_UNSIGNED);
    IRS(float, MPI_FLOAT);
    IRS(double, MPI_DOUBLE);
    free(counts);
}

static void many_ops(void)
{
    enum { N = 5000 };
    static MPI_Op ops[N];
    int size, one = 1, sum = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < N; i++)
        CHECK_MPI(MPI_Op_create(mysum, i % 2, &ops[i]));
    for (int i = 0; i < N; i += 997) {
        sum = 0;
        CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, ops[i], MPI_COMM_WORLD));
        CHECK(sum == size, "operation %d of %d alive: sum %d, expected %d", i, N, sum, size);
    }
    for (int i = 0; i < N; i++) {
        CHECK_MPI(MPI_Op_free(&ops[i]));
        CHECK(ops[i] == MPI_OP_NULL, "MPI_Op_free left operation %d", i);
    }
}

int main(int argc, char **argv)
{
    int provided = -1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    test_begin("reduce_user");
    user_ops();
    ireduce_scatter_in_place();
    many_ops();
    return test_end();
}
