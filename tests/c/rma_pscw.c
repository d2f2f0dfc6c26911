/*
 * rma_pscw.c - general active-target synchronisation (post / start / complete / wait).
 *
 * Each rank exposes its window to its two ring neighbours and accesses theirs: puts its rank into
 * slot 0 of the next rank and slot 1 of the previous one, over several epochs, with MPI_Win_wait
 * and with MPI_Win_test polling. Then a one-to-many pattern: rank 0 exposes to everyone, everyone
 * accumulates. Completing without starting and waiting without posting are MPI_ERR_RMA_SYNC.
 */
#include "stormtest.h"

static MPI_Group ranks_group(MPI_Group world, int n, const int *ranks)
{
    MPI_Group g;
    CHECK_MPI(MPI_Group_incl(world, n, ranks, &g));
    return g;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    test_begin("rma_pscw");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Group world;
    MPI_Comm_group(MPI_COMM_WORLD, &world);

    int mem[4] = {-1, -1, 0, 0};
    MPI_Win win;
    CHECK_MPI(MPI_Win_create(mem, sizeof mem, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int nb[2] = {prev, next};
    MPI_Group ring = ranks_group(world, next == prev ? 1 : 2, nb);

    for (int epoch = 0; epoch < 6; epoch++) {
        CHECK_MPI(MPI_Win_post(ring, 0, win));
        CHECK_MPI(MPI_Win_start(ring, 0, win));
        int v0 = rank * 100 + epoch, v1 = rank * 100 + epoch + 50;
        CHECK_MPI(MPI_Put(&v0, 1, MPI_INT, next, 0, 1, MPI_INT, win));
        CHECK_MPI(MPI_Put(&v1, 1, MPI_INT, prev, 1, 1, MPI_INT, win));
        CHECK_MPI(MPI_Win_complete(win));
        if (epoch % 2 == 0) {
            CHECK_MPI(MPI_Win_wait(win));
        } else {
            int flag = 0;
            while (!flag)
                CHECK_MPI(MPI_Win_test(win, &flag));
        }
        CHECK(mem[0] == prev * 100 + epoch, "epoch %d: slot 0 = %d from rank %d", epoch, mem[0],
              prev);
        CHECK(mem[1] == next * 100 + epoch + 50, "epoch %d: slot 1 = %d from rank %d", epoch,
              mem[1], next);
    }

    /* Rank 0 exposes to all; everyone accumulates into it. */
    int zero = 0;
    MPI_Group g0 = ranks_group(world, 1, &zero);
    if (rank == 0) {
        CHECK_MPI(MPI_Win_post(world, MPI_MODE_NOPUT, win));
    }
    CHECK_MPI(MPI_Win_start(g0, 0, win));
    int one = 1;
    CHECK_MPI(MPI_Accumulate(&one, 1, MPI_INT, 0, 2, 1, MPI_INT, MPI_SUM, win));
    CHECK_MPI(MPI_Win_complete(win));
    if (rank == 0) {
        CHECK_MPI(MPI_Win_wait(win));
        CHECK(mem[2] == size, "slot 2 = %d after %d accumulates", mem[2], size);
    }

    CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    int cls = 0;
    MPI_Error_class(MPI_Win_complete(win), &cls);
    CHECK(cls == MPI_ERR_RMA_SYNC, "complete without start gave class %d", cls);
    MPI_Error_class(MPI_Win_wait(win), &cls);
    CHECK(cls == MPI_ERR_RMA_SYNC, "wait without post gave class %d", cls);

    MPI_Group_free(&g0);
    MPI_Group_free(&ring);
    MPI_Group_free(&world);
    CHECK_MPI(MPI_Win_free(&win));
    return test_end();
}
