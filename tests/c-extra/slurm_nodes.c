/*
 * slurm_nodes.c - a job started by srun over several nodes (tests/tests/slurm.rs).
 *
 * Usage: slurm_nodes SIZE NODES [abort CODE]
 *
 * Checks that the job has SIZE ranks; an allreduce of the ranks; a token passed around the ring
 * of all ranks (point to point, within and across nodes); that MPI_Comm_split_type(SHARED) gives
 * NODES groups of SIZE/NODES ranks, and that the ranks of one group are those Slurm placed on one
 * node (SLURM_NODEID). Each rank prints "rank R of N on node X (local L of LS)". With
 * "abort CODE", rank 1 then calls MPI_Abort(MPI_COMM_WORLD, CODE) while the others wait in a
 * receive nobody matches; the job must end with CODE.
 */
#include "../c/stormtest.h"

int main(int argc, char **argv)
{
    int rank, size, sum, token, left, right, lrank, lsize, leaders, node, lo, hi;
    MPI_Comm shared;
    const char *slurm_node = getenv("SLURM_NODEID");

    MPI_Init(&argc, &argv);
    test_begin("slurm_nodes");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(argc >= 3, "usage: slurm_nodes SIZE NODES [abort CODE]");
    CHECK(size == atoi(argv[1]), "size %d, expected %s", size, argv[1]);

    CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == size * (size - 1) / 2, "allreduce of ranks gave %d", sum);

    /* Three laps of a token around the ring; each rank adds its rank. */
    left = (rank + size - 1) % size;
    right = (rank + 1) % size;
    for (int lap = 0; lap < 3; lap++) {
        if (rank == 0) {
            token = lap * 1000;
            CHECK_MPI(MPI_Send(&token, 1, MPI_INT, right, lap, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Recv(&token, 1, MPI_INT, left, lap, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
            CHECK(token == lap * 1000 + sum, "lap %d: token %d", lap, token);
        } else {
            CHECK_MPI(MPI_Recv(&token, 1, MPI_INT, left, lap, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
            token += rank;
            CHECK_MPI(MPI_Send(&token, 1, MPI_INT, right, lap, MPI_COMM_WORLD));
        }
    }

    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                                  &shared));
    MPI_Comm_rank(shared, &lrank);
    MPI_Comm_size(shared, &lsize);
    int is_leader = lrank == 0;
    CHECK_MPI(MPI_Allreduce(&is_leader, &leaders, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(leaders == atoi(argv[2]), "%d shared-memory groups, expected %s", leaders, argv[2]);
    CHECK(lsize == size / leaders, "a shared-memory group of %d", lsize);
    node = slurm_node ? atoi(slurm_node) : -1;
    CHECK_MPI(MPI_Allreduce(&node, &lo, 1, MPI_INT, MPI_MIN, shared));
    CHECK_MPI(MPI_Allreduce(&node, &hi, 1, MPI_INT, MPI_MAX, shared));
    CHECK(lo == hi && node >= 0, "SLURM_NODEID %d in a group spanning nodes %d..%d", node, lo,
          hi);
    printf("rank %d of %d on node %d (local %d of %d)\n", rank, size, node, lrank, lsize);
    fflush(stdout);
    CHECK_MPI(MPI_Comm_free(&shared));

    if (argc >= 5 && strcmp(argv[3], "abort") == 0) {
        int code = atoi(argv[4]), buf;
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == 1) {
            fprintf(stderr, "rank 1 calling MPI_Abort(%d)\n", code);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, code);
            FAIL("MPI_Abort returned");
        }
        MPI_Recv(&buf, 1, MPI_INT, 1, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        FAIL("a receive nobody sends to completed");
    }
    return test_end();
}
