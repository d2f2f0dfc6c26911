/*
 * instr-coll.c - the small collectives whose instruction counts ci/bench-instr.sh --coll
 * measures under callgrind (noise-free: the same binary and inputs give the same counts).
 *
 *   instr-coll N   on MPI_COMM_WORLD: MPI_Barrier, and of one double each MPI_Bcast,
 *                  MPI_Allreduce (sum), MPI_Reduce (sum, root 0), MPI_Gather, MPI_Scatter,
 *                  MPI_Allgather, MPI_Alltoall and MPI_Reduce_scatter_block (sum); 100 warm-up
 *                  rounds, then N. Per call: a call's count over all ranks / ranks / (N+100).
 *
 * Every result is checked, so a broken path is an error, not a cheap count.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_RANKS 64

static void die(int rank, const char *what)
{
    fprintf(stderr, "instr-coll: rank %d: %s\n", rank, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2 || size > MAX_RANKS) {
        if (rank == 0)
            fprintf(stderr, "usage: instr-coll N (at most %d ranks)\n", MAX_RANKS);
        MPI_Finalize();
        return 2;
    }
    long n = atol(argv[1]) + 100;
    double one, sum, many[MAX_RANKS], got[MAX_RANKS];
    /* The sum over ranks r of (r + 1). */
    double want = size * (size + 1) / 2.0;
    for (long i = 0; i < n; i++) {
        double v = rank + 1;
        for (int r = 0; r < size; r++)
            many[r] = rank * MAX_RANKS + r;
        MPI_Barrier(MPI_COMM_WORLD);
        one = rank == 0 ? (double)i : -1.0;
        MPI_Bcast(&one, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (one != (double)i)
            die(rank, "MPI_Bcast");
        MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (sum != want)
            die(rank, "MPI_Allreduce");
        sum = -1.0;
        MPI_Reduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0 && sum != want)
            die(rank, "MPI_Reduce");
        MPI_Gather(&v, 1, MPI_DOUBLE, got, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        for (int r = 0; rank == 0 && r < size; r++)
            if (got[r] != r + 1)
                die(rank, "MPI_Gather");
        MPI_Scatter(many, 1, MPI_DOUBLE, &one, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (one != rank)
            die(rank, "MPI_Scatter");
        MPI_Allgather(&v, 1, MPI_DOUBLE, got, 1, MPI_DOUBLE, MPI_COMM_WORLD);
        for (int r = 0; r < size; r++)
            if (got[r] != r + 1)
                die(rank, "MPI_Allgather");
        MPI_Alltoall(many, 1, MPI_DOUBLE, got, 1, MPI_DOUBLE, MPI_COMM_WORLD);
        for (int r = 0; r < size; r++)
            if (got[r] != r * MAX_RANKS + rank)
                die(rank, "MPI_Alltoall");
        for (int r = 0; r < size; r++)
            many[r] = r + rank;
        MPI_Reduce_scatter_block(many, &one, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        /* The sum over ranks q of (rank + q). */
        if (one != size * rank + (size - 1) * size / 2.0)
            die(rank, "MPI_Reduce_scatter_block");
    }
    MPI_Finalize();
    return 0;
}
