/*
 * unsupported.c - calls MPI_Ineighbor_allgather on a distributed graph of 65 neighbours, more
 * than stormpi's nonblocking neighbourhood collectives take (64; the README's feature table says
 * so), under the default error handler. The job must end non-zero with a message naming
 * MPI_Ineighbor_allgather and saying it is not supported. If it returns at all (supported one
 * day, or the error was swallowed), the program says so with "FAIL unsupported" and the test
 * fails: by then the test needs another unsupported operation.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define DEGREE 65

int main(int argc, char **argv)
{
    int rank, size, rc, i, mine;
    int nbrs[DEGREE], got[DEGREE];
    MPI_Comm graph;
    MPI_Request req;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* A multigraph: the edges alternate between the two ring neighbours (MPI allows repeated
     * neighbours). */
    for (i = 0; i < DEGREE; i++)
        nbrs[i] = i % 2 ? (rank + 1) % size : (rank + size - 1) % size;
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, DEGREE, nbrs, MPI_UNWEIGHTED, DEGREE, nbrs,
                                   MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &graph);
    mine = rank;
    rc = MPI_Ineighbor_allgather(&mine, 1, MPI_INT, got, 1, MPI_INT, graph, &req);
    if (rc == MPI_SUCCESS)
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    fprintf(stderr, "FAIL unsupported: rank %d: MPI_Ineighbor_allgather returned %d\n", rank, rc);
    MPI_Finalize();
    return 0;
}
