/*
 * ibarrier_many.c - 128 MPI_Ibarrier in flight at once with the default parameters (issue 27:
 * they once exhausted a pool of 64), completed by one MPI_Waitall; then 300 at once on two
 * communicators, interleaved with non-blocking allreduces whose results are checked.
 */
#include "stormtest.h"

#define N 300

int main(int argc, char **argv)
{
    static MPI_Request reqs[2 * N];
    static int in[N], out[N];
    MPI_Comm dup;
    int size, rank, i;
    MPI_Init(&argc, &argv);
    test_begin("ibarrier_many");
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);

    for (i = 0; i < 128; i++)
        CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &reqs[i]));
    CHECK_MPI(MPI_Waitall(128, reqs, MPI_STATUSES_IGNORE));

    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    for (i = 0; i < N; i++) {
        in[i] = rank + i;
        out[i] = -1;
        CHECK_MPI(MPI_Ibarrier(i % 2 ? dup : MPI_COMM_WORLD, &reqs[2 * i]));
        CHECK_MPI(MPI_Iallreduce(&in[i], &out[i], 1, MPI_INT, MPI_SUM, i % 3 ? MPI_COMM_WORLD : dup,
                                 &reqs[2 * i + 1]));
    }
    CHECK_MPI(MPI_Waitall(2 * N, reqs, MPI_STATUSES_IGNORE));
    for (i = 0; i < N; i++)
        CHECK(out[i] == size * (size - 1) / 2 + size * i, "Iallreduce %d gave %d, expected %d", i,
              out[i], size * (size - 1) / 2 + size * i);
    CHECK_MPI(MPI_Comm_free(&dup));
    return test_end();
}
