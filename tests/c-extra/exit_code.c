/*
 * exit_code.c - one rank leaves with exit(3) after MPI_Init, without MPI_Finalize, while the
 * others wait in a receive nobody matches. The launcher must end the job, name that rank and
 * pass its status on. Rank 1 is the one (rank 0 when running alone).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size, buf;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == (size > 1 ? 1 : 0)) {
        fprintf(stderr, "rank %d exiting with status 3\n", rank);
        exit(3);
    }
    MPI_Recv(&buf, 1, MPI_INT, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    fprintf(stderr, "FAIL exit_code: rank %d: a receive nobody sends to completed\n", rank);
    return 1;
}
