/* Passive target without the target (tests/tests/lwk_rma.rs runs it on the node build): after a
 * barrier, rank 1 sleeps 2 s outside MPI while rank 0, under a lock taken with MPI_MODE_NOCHECK
 * (no lock message for the target to answer), puts, flushes, gets, accumulates, fetches-and-adds,
 * compares-and-swaps and get-accumulates through a strided type on rank 1's window, and unlocks.
 * When the network moves the data (Portals, with an NI that works while its process sleeps) the
 * epoch completes long before rank 1 wakes; the program checks it finished within 1 s (a
 * correctness check with a wide margin, not a timing). Run with the argument "stalls" (active
 * messages, or an NI that works only inside its process's calls) it checks the opposite, so the
 * first check can fail. Values are checked in both cases, at the origin and, after the epoch, at
 * the target. */
#include <mpi.h>
#include "stormtest.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 64

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("rma_passive_nic");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 2, "needs 2 ranks");
    int stalls = argc > 1 && strcmp(argv[1], "stalls") == 0;

    /* The user's memory: N ints, then a counter. */
    int64_t *mem = malloc((N + 1) * sizeof(int64_t));
    CHECK(mem != NULL, "malloc");
    for (int k = 0; k <= N; k++)
        mem[k] = -1;
    MPI_Win win;
    CHECK_MPI(MPI_Win_create(mem, (N + 1) * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL,
                             MPI_COMM_WORLD, &win));
    MPI_Barrier(MPI_COMM_WORLD);

    if (rank == 1) {
        sleep(2);
    } else if (rank == 0) {
        int64_t out[N], back[N], one = 5, old = 0, cmp = 4, swp = 77, was = 0;
        for (int k = 0; k < N; k++)
            out[k] = 1000 + k;
        /* Rank 1 may still be in the barrier's last call: let it fall asleep first. */
        usleep(200000);
        double t0 = MPI_Wtime();
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 1, MPI_MODE_NOCHECK, win));
        CHECK_MPI(MPI_Put(out, N, MPI_INT64_T, 1, 0, N, MPI_INT64_T, win));
        CHECK_MPI(MPI_Win_flush(1, win));
        CHECK_MPI(MPI_Accumulate(out, N, MPI_INT64_T, 1, 0, N, MPI_INT64_T, MPI_SUM, win));
        CHECK_MPI(MPI_Win_flush(1, win));
        CHECK_MPI(MPI_Get(back, N, MPI_INT64_T, 1, 0, N, MPI_INT64_T, win));
        CHECK_MPI(MPI_Win_flush(1, win));
        /* The counter: -1 + 5 = 4, then 4 == 4 swaps in 77. */
        CHECK_MPI(MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 1, N, MPI_SUM, win));
        CHECK_MPI(MPI_Win_flush(1, win));
        CHECK_MPI(MPI_Compare_and_swap(&swp, &cmp, &was, MPI_INT64_T, 1, N, win));
        /* A strided get-accumulate: one atomic per element of the vector, fetched and unpacked. */
        MPI_Datatype every_other;
        CHECK_MPI(MPI_Type_vector(N / 2, 1, 2, MPI_INT64_T, &every_other));
        CHECK_MPI(MPI_Type_commit(&every_other));
        int64_t add[N / 2], got[N / 2];
        for (int k = 0; k < N / 2; k++)
            add[k] = 1;
        CHECK_MPI(MPI_Get_accumulate(add, N / 2, MPI_INT64_T, got, N / 2, MPI_INT64_T, 1, 0, 1,
                                     every_other, MPI_SUM, win));
        CHECK_MPI(MPI_Win_unlock(1, win));
        CHECK_MPI(MPI_Type_free(&every_other));
        double took = MPI_Wtime() - t0;
        for (int k = 0; k < N; k++)
            CHECK(back[k] == 2 * (1000 + k), "got %lld at %d, want %d", (long long)back[k], k,
                  2 * (1000 + k));
        for (int k = 0; k < N / 2; k++)
            CHECK(got[k] == 2 * (1000 + 2 * k), "get-accumulate fetched %lld at %d, want %d",
                  (long long)got[k], k, 2 * (1000 + 2 * k));
        CHECK(old == -1, "fetch-and-op fetched %lld, want -1", (long long)old);
        CHECK(was == 4, "compare-and-swap found %lld, want 4", (long long)was);
        if (stalls)
            CHECK(took > 1.0, "the epoch took %.3f s: it did not wait for the sleeping target",
                  took);
        else
            CHECK(took < 1.0, "the epoch took %.3f s: it waited for the target to wake", took);
        printf("rank 0: epoch on the sleeping target took %.3f s\n", took);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win));
        CHECK_MPI(MPI_Win_sync(win));
        for (int k = 0; k < N; k++)
            CHECK(mem[k] == 2 * (1000 + k) + (k % 2 == 0), "window holds %lld at %d, want %d",
                  (long long)mem[k], k, 2 * (1000 + k) + (k % 2 == 0));
        CHECK(mem[N] == 77, "counter holds %lld, want 77", (long long)mem[N]);
        CHECK_MPI(MPI_Win_unlock(1, win));
    }
    CHECK_MPI(MPI_Win_free(&win));
    free(mem);
    return test_end();
}
