/*
 * kill_victim.c - a job that runs until something kills it, for the launcher's failure tests.
 *
 * After MPI_Init every rank prints "READY <rank> <pid>" (flushed), then all ranks loop: a small
 * MPI_Sendrecv around the ring (value checked) and an MPI_Barrier, every iteration.  A test kills
 * one rank with SIGKILL; the launcher must then tear the job down and exit non-zero.
 *
 * usage: kill_victim [iterations]   (default 0 = forever; with a count it ends with "OK")
 */
#include "stormtest.h"
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, size, left, right;
    long iters = 0, i;

    MPI_Init(&argc, &argv);
    test_begin("kill_victim");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    if (argc > 1)
        iters = atol(argv[1]);

    printf("READY %d %ld\n", rank, (long)getpid());
    fflush(stdout);

    for (i = 0; iters == 0 || i < iters; i++) {
        long out = i * 1000 + rank, in = -1;
        CHECK_MPI(MPI_Sendrecv(&out, 1, MPI_LONG, right, 1, &in, 1, MPI_LONG, left, 1,
                               MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(in == i * 1000 + left, "iteration %ld: received %ld from %d", i, in, left);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    return test_end();
}
