/*
 * rma_large_count.c - the large-count (_c) forms of one-sided communication.
 *
 * Checked: a window made by MPI_Win_create_c (MPI_Aint displacement unit 8) and one by
 * MPI_Win_allocate_c; MPI_Put_c, MPI_Get_c, MPI_Accumulate_c and MPI_Get_accumulate_c with
 * MPI_Count counts, and their request forms MPI_Rput_c, MPI_Rget_c, MPI_Raccumulate_c,
 * MPI_Rget_accumulate_c, under fences and a lock_all epoch, each value checked at its target;
 * a negative MPI_Count is MPI_ERR_COUNT and a zero displacement unit MPI_ERR_DISP (under
 * MPI_ERRORS_RETURN).
 *
 * usage: rma_large_count
 */
#include "stormtest.h"

#define N 64

int main(int argc, char **argv)
{
    int rank, size, right, left, i, rc, cls;
    long long mem[N], got[N], old[N];
    long long *amem = NULL;
    MPI_Win win, awin;
    MPI_Request rq[2];

    MPI_Init(&argc, &argv);
    test_begin("rma_large_count");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    for (i = 0; i < N; i++)
        mem[i] = -1;

    CHECK_MPI(MPI_Win_create_c(mem, (MPI_Aint)sizeof mem, (MPI_Aint)sizeof(long long),
                               MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    CHECK_MPI(MPI_Win_allocate_c((MPI_Aint)(N * sizeof(long long)), (MPI_Aint)sizeof(long long),
                                 MPI_INFO_NULL, MPI_COMM_WORLD, &amem, &awin));
    for (i = 0; i < N; i++)
        amem[i] = 1000 * rank + i;

    /* Put_c the first half to the right, Get_c the second half of the allocated window from the
       left. */
    long long src[N / 2];
    for (i = 0; i < N / 2; i++)
        src[i] = 100 * rank + i;
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Win_fence(0, awin));
    CHECK_MPI(MPI_Put_c(src, (MPI_Count)(N / 2), MPI_LONG_LONG, right, 0, (MPI_Count)(N / 2),
                        MPI_LONG_LONG, win));
    CHECK_MPI(MPI_Get_c(got, (MPI_Count)(N / 2), MPI_LONG_LONG, left, N / 2, (MPI_Count)(N / 2),
                        MPI_LONG_LONG, awin));
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Win_fence(0, awin));
    for (i = 0; i < N / 2; i++) {
        CHECK(mem[i] == 100 * left + i, "Put_c: mem[%d] = %lld", i, mem[i]);
        CHECK(got[i] == 1000 * left + N / 2 + i, "Get_c: got[%d] = %lld", i, got[i]);
    }

    /* Accumulate_c (SUM) from every rank into rank 0's second half; Get_accumulate_c on the
       allocated window fetches the old values and adds. */
    long long ones[N / 2];
    for (i = 0; i < N / 2; i++)
        ones[i] = 1;
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Accumulate_c(ones, (MPI_Count)(N / 2), MPI_LONG_LONG, 0, N / 2,
                               (MPI_Count)(N / 2), MPI_LONG_LONG, MPI_SUM, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    if (rank == 0)
        for (i = N / 2; i < N; i++)
            CHECK(mem[i] == -1 + size, "Accumulate_c: mem[%d] = %lld", i, mem[i]);

    CHECK_MPI(MPI_Win_lock_all(0, awin));
    CHECK_MPI(MPI_Get_accumulate_c(ones, 1, MPI_LONG_LONG, old, 1, MPI_LONG_LONG, right, 0, 1,
                                   MPI_LONG_LONG, MPI_SUM, awin));
    CHECK_MPI(MPI_Win_flush_all(awin));
    CHECK(old[0] == 1000 * right, "Get_accumulate_c fetched %lld", old[0]);
    CHECK_MPI(MPI_Rput_c(src, 1, MPI_LONG_LONG, right, 1, 1, MPI_LONG_LONG, awin, &rq[0]));
    CHECK_MPI(MPI_Rget_c(got, 1, MPI_LONG_LONG, right, 2, 1, MPI_LONG_LONG, awin, &rq[1]));
    CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
    CHECK(got[0] == 1000 * right + 2, "Rget_c got %lld", got[0]);
    CHECK_MPI(MPI_Raccumulate_c(ones, 1, MPI_LONG_LONG, right, 3, 1, MPI_LONG_LONG, MPI_SUM, awin,
                                &rq[0]));
    CHECK_MPI(MPI_Rget_accumulate_c(ones, 1, MPI_LONG_LONG, old, 1, MPI_LONG_LONG, right, 4, 1,
                                    MPI_LONG_LONG, MPI_SUM, awin, &rq[1]));
    CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
    CHECK(old[0] == 1000 * right + 4, "Rget_accumulate_c fetched %lld", old[0]);
    CHECK_MPI(MPI_Win_unlock_all(awin));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(amem[0] == 1000 * rank + 1, "amem[0] = %lld", amem[0]);
    CHECK(amem[1] == 100 * left, "Rput_c: amem[1] = %lld", amem[1]);
    CHECK(amem[3] == 1000 * rank + 4, "Raccumulate_c: amem[3] = %lld", amem[3]);
    CHECK(amem[4] == 1000 * rank + 5, "Rget_accumulate_c: amem[4] = %lld", amem[4]);

    /* Bad arguments. */
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK_MPI(MPI_Win_fence(0, win));
    rc = MPI_Put_c(src, (MPI_Count)-1, MPI_LONG_LONG, right, 0, 1, MPI_LONG_LONG, win);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COUNT, "Put_c of count -1: class %d", cls);
    CHECK_MPI(MPI_Win_fence(0, win));
    MPI_Win bad = MPI_WIN_NULL;
    rc = MPI_Win_create_c(mem, (MPI_Aint)sizeof mem, 0, MPI_INFO_NULL, MPI_COMM_WORLD, &bad);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_DISP, "Win_create_c with unit 0: class %d", cls);

    CHECK_MPI(MPI_Win_free(&win));
    CHECK_MPI(MPI_Win_free(&awin));
    return test_end();
}
