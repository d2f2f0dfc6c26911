/*
 * unsupported.c - calls MPI_Win_allocate_shared, which stormpi does not implement yet, under the
 * default error handler. The job must end non-zero with a message naming MPI_Win_allocate_shared
 * and saying it is not supported. If it returns at all (implemented one day, or the error was
 * swallowed), the program says so with "FAIL unsupported" and the test fails: by then the test
 * needs another unimplemented function.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, rc;
    int *memory = NULL;
    MPI_Win win = MPI_WIN_NULL;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    rc = MPI_Win_allocate_shared(16 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD,
                                 &memory, &win);
    fprintf(stderr, "FAIL unsupported: rank %d: MPI_Win_allocate_shared returned %d\n", rank, rc);
    MPI_Finalize();
    return 0;
}
