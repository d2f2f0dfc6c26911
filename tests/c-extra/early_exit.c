/*
 * early_exit.c - rank 1 leaves after MPI_Init without MPI_Finalize while the others wait in a
 * receive nobody matches; the others printed a line each to stdout first, without flushing.
 *
 * usage: early_exit STATUS   rank 1 returns STATUS from main (0: a "successful" exit that
 *                            never finalized) or calls exit(STATUS)
 *
 * The launcher must end the job and name rank 1 whatever its status, and the lines the
 * waiting ranks printed must reach the launcher's stdout although they were never flushed.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size, buf, status = argc > 1 ? atoi(argv[1]) : 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != 1)
        printf("unflushed line from rank %d\n", rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        fprintf(stderr, "rank 1 leaving with status %d before MPI_Finalize\n", status);
        if (status == 0)
            return 0;
        exit(status);
    }
    MPI_Recv(&buf, 1, MPI_INT, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    fprintf(stderr, "FAIL early_exit: rank %d: a receive nobody sends to completed\n", rank);
    return 1;
}
