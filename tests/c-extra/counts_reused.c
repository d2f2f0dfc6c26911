/*
 * counts_reused.c - MPI_Ireduce_scatter whose counts array the caller overwrites once the call
 * has returned, before MPI_Wait. The standard asks callers to leave it alone, but MPICH and Open
 * MPI read it only at the start, and bindings rely on that: mpi4py's fallback for
 * MPI_Ireduce_scatter_c converts the counts into a buffer it reuses, and rank 1 used to get no
 * result at all. In place and not, counts 1..size, MIN over ints; prints "OK counts_reused".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size, total, failures = 0, any;
    MPI_Request req;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    total = size * (size + 1) / 2;
    int *counts = malloc(size * sizeof(int));
    int *buf = malloc(total * sizeof(int));
    int *in = malloc(total * sizeof(int));
    for (int inplace = 0; inplace < 2; inplace++) {
        for (int i = 0; i < size; i++)
            counts[i] = i + 1;
        for (int i = 0; i < total; i++) {
            in[i] = rank + i;
            buf[i] = inplace ? rank + i : -1;
        }
        MPI_Ireduce_scatter(inplace ? MPI_IN_PLACE : in, buf, counts, MPI_INT, MPI_MIN,
                            MPI_COMM_WORLD, &req);
        for (int i = 0; i < size; i++)
            counts[i] = 0;
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        /* Rank r's block starts at r(r+1)/2 and has r+1 elements; the minimum is rank 0's. */
        int start = rank * (rank + 1) / 2;
        for (int i = 0; i < rank + 1; i++) {
            if (buf[i] != start + i) {
                fprintf(stderr, "FAIL counts_reused: rank %d (%s): element %d is %d, not %d\n",
                        rank, inplace ? "in place" : "not in place", i, buf[i], start + i);
                failures++;
                break;
            }
        }
    }
    MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any == 0 && rank == 0)
        printf("OK counts_reused\n");
    free(counts);
    free(buf);
    free(in);
    MPI_Finalize();
    return failures ? 1 : 0;
}
