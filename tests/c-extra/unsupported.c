/*
 * unsupported.c - calls MPI_Comm_spawn, which stormpi does not implement yet, under the default
 * error handler. The job must end non-zero with a message naming MPI_Comm_spawn and saying it is
 * not supported. If it returns at all (implemented one day, or the error was swallowed), the
 * program says so with "FAIL unsupported" and the test fails: by then the test needs another
 * unimplemented function.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, rc;
    MPI_Comm inter;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    rc = MPI_Comm_spawn("true", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                        MPI_ERRCODES_IGNORE);
    fprintf(stderr, "FAIL unsupported: rank %d: MPI_Comm_spawn returned %d\n", rank, rc);
    MPI_Finalize();
    return 0;
}
