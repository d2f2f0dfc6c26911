/*
 * rma_lock.c - passive-target one-sided communication.
 *
 * Exclusive locks make read-modify-write sequences atomic: every rank adds 1 to a counter at rank
 * 0 ITER times by lock / get / flush / put / unlock, and the counter ends at size * ITER. Shared
 * locks with MPI_Fetch_and_op: every rank takes ITER tickets from a counter at the last rank, and
 * the tickets are all distinct. MPI_Compare_and_swap as a spin lock around a non-atomic update.
 * lock_all with request-based operations (MPI_Rput, MPI_Rget, MPI_Raccumulate,
 * MPI_Rget_accumulate) completed by MPI_Wait/MPI_Waitall, flush_local, flush_all, MPI_Win_sync.
 * A target computing outside MPI delays nothing forever: rank 0 sleeps while others lock it.
 * Errors: unlocking what is not locked and flushing outside an epoch are MPI_ERR_RMA_SYNC.
 */
#include "stormtest.h"

#define ITER 50

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    test_begin("rma_lock");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    long *mem;
    MPI_Win win;
    int slots = 8 + size;
    CHECK_MPI(MPI_Win_allocate(slots * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD,
                               &mem, &win));
    for (int i = 0; i < slots; i++)
        mem[i] = 0;
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* 1. Exclusive lock: get, flush, put. */
    for (int i = 0; i < ITER; i++) {
        long v = -1;
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        CHECK_MPI(MPI_Get(&v, 1, MPI_LONG, 0, 0, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_flush(0, win));
        v += 1;
        CHECK_MPI(MPI_Put(&v, 1, MPI_LONG, 0, 0, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_unlock(0, win));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        CHECK_MPI(MPI_Win_sync(win));
        CHECK(mem[0] == (long)size * ITER, "counter %ld after %d increments", mem[0], size * ITER);
        CHECK_MPI(MPI_Win_unlock(0, win));
    }

    /* 2. Shared locks and Fetch_and_op: distinct tickets. */
    int last = size - 1;
    long tickets[ITER];
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, last, 0, win));
    for (int i = 0; i < ITER; i++) {
        long one = 1;
        CHECK_MPI(MPI_Fetch_and_op(&one, &tickets[i], MPI_LONG, last, 1, MPI_SUM, win));
        CHECK_MPI(MPI_Win_flush(last, win));
    }
    long peek = -1;
    CHECK_MPI(MPI_Fetch_and_op(NULL, &peek, MPI_LONG, last, 1, MPI_NO_OP, win));
    CHECK_MPI(MPI_Win_unlock(last, win));
    CHECK(peek >= ITER && peek <= (long)size * ITER, "MPI_NO_OP read %ld", peek);
    for (int i = 1; i < ITER; i++)
        CHECK(tickets[i] > tickets[i - 1], "tickets not increasing: %ld then %ld", tickets[i - 1],
              tickets[i]);
    long *all = malloc(sizeof(long) * ITER * size);
    CHECK_MPI(MPI_Allgather(tickets, ITER, MPI_LONG, all, ITER, MPI_LONG, MPI_COMM_WORLD));
    char *seen = calloc(ITER * size, 1);
    for (int i = 0; i < ITER * size; i++) {
        CHECK(all[i] >= 0 && all[i] < ITER * size, "ticket %ld out of range", all[i]);
        CHECK(!seen[all[i]], "ticket %ld given twice", all[i]);
        seen[all[i]] = 1;
    }
    free(seen);
    free(all);

    /* 3. Compare_and_swap as a spin lock at rank 0 (slot 2) guarding a plain counter (slot 3). */
    for (int i = 0; i < 10; i++) {
        long zero = 0, me = rank + 1, old = -1;
        CHECK_MPI(MPI_Win_lock_all(0, win));
        do {
            CHECK_MPI(MPI_Compare_and_swap(&me, &zero, &old, MPI_LONG, 0, 2, win));
            CHECK_MPI(MPI_Win_flush(0, win));
        } while (old != 0);
        long v = -1;
        CHECK_MPI(MPI_Get(&v, 1, MPI_LONG, 0, 3, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_flush(0, win));
        v++;
        CHECK_MPI(MPI_Put(&v, 1, MPI_LONG, 0, 3, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_flush(0, win));
        CHECK_MPI(MPI_Compare_and_swap(&zero, &me, &old, MPI_LONG, 0, 2, win));
        CHECK_MPI(MPI_Win_flush(0, win));
        CHECK(old == me, "released a spin lock held by %ld", old);
        CHECK_MPI(MPI_Win_unlock_all(win));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0)
        CHECK(mem[3] == 10L * size, "CAS-guarded counter %ld, expected %d", mem[3], 10 * size);

    /* 4. Request-based operations under lock_all: each rank writes its slot at every target. */
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_lock_all(0, win));
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * 2 * size);
    long mine = 100 + rank, *back = malloc(sizeof(long) * size);
    for (int t = 0; t < size; t++)
        CHECK_MPI(MPI_Rput(&mine, 1, MPI_LONG, t, 8 + rank, 1, MPI_LONG, win, &reqs[t]));
    CHECK_MPI(MPI_Waitall(size, reqs, MPI_STATUSES_IGNORE));
    CHECK_MPI(MPI_Win_flush_all(win));
    for (int t = 0; t < size; t++)
        CHECK_MPI(MPI_Rget(&back[t], 1, MPI_LONG, t, 8 + rank, 1, MPI_LONG, win, &reqs[t]));
    CHECK_MPI(MPI_Waitall(size, reqs, MPI_STATUSES_IGNORE));
    for (int t = 0; t < size; t++)
        CHECK(back[t] == mine, "MPI_Rget from %d read %ld, expected %ld", t, back[t], mine);
    long add = 5, before = -1;
    MPI_Request r2[2];
    CHECK_MPI(MPI_Raccumulate(&add, 1, MPI_LONG, (rank + 1) % size, 4, 1, MPI_LONG, MPI_SUM, win,
                              &r2[0]));
    CHECK_MPI(MPI_Wait(&r2[0], MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Win_flush_local_all(win));
    CHECK_MPI(MPI_Win_unlock_all(win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(mem[4] == 5, "slot 4 is %ld after one MPI_Raccumulate of 5", mem[4]);
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, (rank + 1) % size, 0, win));
    CHECK_MPI(MPI_Rget_accumulate(&add, 1, MPI_LONG, &before, 1, MPI_LONG, (rank + 1) % size, 5, 1,
                                  MPI_LONG, MPI_REPLACE, win, &r2[1]));
    CHECK_MPI(MPI_Wait(&r2[1], MPI_STATUS_IGNORE));
    CHECK(before == 0, "slot 5 held %ld before the replace", before);
    CHECK_MPI(MPI_Win_flush_local((rank + 1) % size, win));
    CHECK_MPI(MPI_Win_unlock((rank + 1) % size, win));
    free(reqs);
    free(back);

    /* 5. A target busy outside MPI: rank 0 sleeps; the others' locks wait for it, then go on. */
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        test_sleep_ms(200);
    } else {
        long one = 1;
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        CHECK_MPI(MPI_Accumulate(&one, 1, MPI_LONG, 0, 6, 1, MPI_LONG, MPI_SUM, win));
        CHECK_MPI(MPI_Win_unlock(0, win));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0)
        CHECK(mem[6] == size - 1, "slot 6 is %ld, expected %d", mem[6], size - 1);

    /* 6. Errors. */
    CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    int cls = 0;
    MPI_Error_class(MPI_Win_unlock(0, win), &cls);
    CHECK(cls == MPI_ERR_RMA_SYNC, "unlock without lock gave class %d", cls);
    MPI_Error_class(MPI_Win_flush(0, win), &cls);
    CHECK(cls == MPI_ERR_RMA_SYNC, "flush without lock gave class %d", cls);
    MPI_Error_class(MPI_Win_unlock_all(win), &cls);
    CHECK(cls == MPI_ERR_RMA_SYNC, "unlock_all without lock_all gave class %d", cls);
    long x = 0;
    MPI_Request rq;
    CHECK_MPI(MPI_Win_fence(0, win));
    MPI_Error_class(MPI_Rput(&x, 1, MPI_LONG, 0, 0, 1, MPI_LONG, win, &rq), &cls);
    CHECK(cls == MPI_ERR_RMA_SYNC, "MPI_Rput in a fence epoch gave class %d", cls);
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));

    CHECK_MPI(MPI_Win_free(&win));
    return test_end();
}
