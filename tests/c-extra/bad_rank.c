/*
 * bad_rank.c - MPI_Send to a rank that does not exist, under the default error handler
 * (MPI_ERRORS_ARE_FATAL). The job must end non-zero with a message naming MPI_Send and the bad
 * rank. Every rank first passes a barrier, so the failure is not a start-up problem; rank 0
 * then sends to rank <size> (one past the last), the others wait in a receive nobody matches.
 * Reaching the end of the program is a failure: it prints "FAIL bad_rank".
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, buf = 42;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("sending to rank %d\n", size);
        fflush(stdout);
        MPI_Send(&buf, 1, MPI_INT, size, 0, MPI_COMM_WORLD);
    } else {
        MPI_Recv(&buf, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    fprintf(stderr, "FAIL bad_rank: rank %d: still running after the bad MPI_Send\n", rank);
    MPI_Finalize();
    return 0;
}
