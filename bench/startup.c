/* startup.c - the cheapest MPI job: MPI_Init and MPI_Finalize (ci/bench-startup.sh times it). */
#include <mpi.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Finalize();
    return 0;
}
