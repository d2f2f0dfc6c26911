/*
 * abort.c - MPI_Abort must end the whole job.
 *
 * After a barrier, rank 1 (rank 0 when running alone) prints "rank R calling MPI_Abort(7)" to
 * stderr and calls MPI_Abort(MPI_COMM_WORLD, 7); every other rank blocks in an MPI_Recv that no
 * one will ever match.  The launcher must tear the job down promptly and exit non-zero.  If
 * MPI_Abort returns, or the job finishes, that is a failure.
 */
#include "stormtest.h"

int main(int argc, char **argv)
{
    int rank, size, victim, buf;

    MPI_Init(&argc, &argv);
    test_begin("abort");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    victim = size > 1 ? 1 : 0;
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == victim) {
        fprintf(stderr, "rank %d calling MPI_Abort(7)\n", rank);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 7);
        fprintf(stderr, "FAIL abort: rank %d: MPI_Abort returned\n", rank);
        return 1;
    }
    MPI_Recv(&buf, 1, MPI_INT, victim, 12345, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    fprintf(stderr, "FAIL abort: rank %d: a receive nobody sends to completed\n", rank);
    return 1;
}
