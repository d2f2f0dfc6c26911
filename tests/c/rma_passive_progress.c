/* Passive-target progress (tests/tests/rma.rs runs it over TCP): after a barrier, rank 1 sleeps
 * 2 s outside MPI while rank 0 locks rank 1's window, puts, flushes, gets and unlocks. With the
 * passive-target progress thread the epoch completes long before rank 1 wakes; the program
 * checks it finished within 1 s (a correctness check with a wide margin, not a timing). Run with
 * the argument "stalls" (and osc_progress_thread=off) it checks the opposite: the epoch waited
 * for the sleeper — so the first check can fail. Other ranks only take part in the barriers. */
#include <mpi.h>
#include "stormtest.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 64

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("rma_passive_progress");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 2, "needs 2 ranks");
    int stalls = argc > 1 && strcmp(argv[1], "stalls") == 0;

    /* MPI_Win_create over the user's memory: reached by messages, not by loads and stores
     * (MPI_Win_allocate on one node would be a shared segment, needing no target at all). */
    int *mem = malloc(N * sizeof(int));
    CHECK(mem != NULL, "malloc");
    MPI_Win win;
    CHECK_MPI(MPI_Win_create(mem, N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD,
                             &win));
    for (int k = 0; k < N; k++)
        mem[k] = -1;
    MPI_Barrier(MPI_COMM_WORLD);

    if (rank == 1) {
        /* Computing outside MPI. */
        sleep(2);
    } else if (rank == 0) {
        int out[N], back[N];
        for (int k = 0; k < N; k++)
            out[k] = 1000 + k;
        double t0 = MPI_Wtime();
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win));
        CHECK_MPI(MPI_Put(out, N, MPI_INT, 1, 0, N, MPI_INT, win));
        CHECK_MPI(MPI_Win_flush(1, win));
        CHECK_MPI(MPI_Get(back, N, MPI_INT, 1, 0, N, MPI_INT, win));
        CHECK_MPI(MPI_Win_unlock(1, win));
        double took = MPI_Wtime() - t0;
        for (int k = 0; k < N; k++)
            CHECK(back[k] == 1000 + k, "got %d at %d, want %d", back[k], k, 1000 + k);
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
            CHECK(mem[k] == 1000 + k, "window holds %d at %d, want %d", mem[k], k, 1000 + k);
        CHECK_MPI(MPI_Win_unlock(1, win));
    }
    CHECK_MPI(MPI_Win_free(&win));
    free(mem);
    return test_end();
}
