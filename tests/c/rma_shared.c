/*
 * rma_shared.c - windows in memory shared by the processes of a node (MPI_Win_allocate_shared).
 *
 * 1. Layout: parts of different sizes, contiguous by default (rank r's part right after rank
 *    r-1's), MPI_Win_shared_query for every rank and for MPI_PROC_NULL (the first part that is not
 *    empty), the window's attributes (flavor shared, unified model); every rank stores its part
 *    directly and reads the others' through the queried pointers after MPI_Win_sync + barrier.
 *    With alloc_shared_noncontig, each part starts on a page.
 * 2. Operations with fences: MPI_Put, MPI_Get, MPI_Accumulate on a vector type, MPI_Compare_and_swap
 *    (exactly one winner), MPI_Get_accumulate with MPI_NO_OP and MPI_REPLACE, MPI_MINLOC on pairs.
 * 3. Passive target: lock/get/flush/put/unlock increments under exclusive locks (exact total);
 *    MPI_Fetch_and_op tickets under lock_all (all distinct, exact total); request-based MPI_Rput /
 *    MPI_Rget; post/start/complete/wait.
 * 4. No target involvement: rank 0 sits in a sleep loop, calling no MPI function, while every other
 *    rank locks it, puts, unlocks and adds to a counter with MPI_Fetch_and_op; rank 0 sees all of
 *    it arrive in its memory before it calls MPI again.
 * 5. A window of one process (MPI_COMM_SELF).
 */
#include "stormtest.h"
#include <unistd.h>

#define ITER 100

static MPI_Aint part_bytes(int r) { return (MPI_Aint)((r + 1) * 8 * sizeof(long)); }

static void layout(MPI_Comm node, int rank, int size)
{
    long *mine;
    MPI_Win win;
    CHECK_MPI(MPI_Win_allocate_shared(part_bytes(rank), sizeof(long), MPI_INFO_NULL, node, &mine,
                                      &win));
    int *flavor, *model, flag;
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag));
    CHECK(flag && *flavor == MPI_WIN_FLAVOR_SHARED, "flavor %d", flag ? *flavor : -1);
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag));
    CHECK(flag && *model == MPI_WIN_UNIFIED, "model %d", flag ? *model : -1);

    CHECK_MPI(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
    for (int i = 0; i < (rank + 1) * 8; i++)
        mine[i] = rank * 1000 + i;
    CHECK_MPI(MPI_Win_sync(win));
    CHECK_MPI(MPI_Barrier(node));
    CHECK_MPI(MPI_Win_sync(win));
    char *prev_end = NULL;
    for (int r = 0; r < size; r++) {
        MPI_Aint sz;
        int du;
        long *p;
        CHECK_MPI(MPI_Win_shared_query(win, r, &sz, &du, &p));
        CHECK(sz == part_bytes(r) && du == (int)sizeof(long), "rank %d: size %ld unit %d", r,
              (long)sz, du);
        if (r == rank)
            CHECK(p == mine, "my own part is where MPI_Win_allocate_shared said");
        if (prev_end)
            CHECK((char *)p == prev_end, "rank %d's part does not follow rank %d's", r, r - 1);
        prev_end = (char *)p + sz;
        for (int i = 0; i < (r + 1) * 8; i++)
            CHECK(p[i] == r * 1000 + i, "rank %d's element %d is %ld", r, i, p[i]);
    }
    MPI_Aint sz;
    MPI_Aint du_c;
    long *p0, *pn;
    CHECK_MPI(MPI_Win_shared_query_c(win, 0, &sz, &du_c, &p0));
    CHECK(du_c == (MPI_Aint)sizeof(long), "large-count unit %ld", (long)du_c);
    int du;
    CHECK_MPI(MPI_Win_shared_query(win, MPI_PROC_NULL, &sz, &du, &pn));
    CHECK(pn == p0 && sz == part_bytes(0), "MPI_PROC_NULL names rank 0's part");
    CHECK_MPI(MPI_Barrier(node));
    CHECK_MPI(MPI_Win_unlock_all(win));
    CHECK_MPI(MPI_Win_free(&win));

    /* Rank 0's part empty: MPI_PROC_NULL names the next one; noncontig: pages. */
    MPI_Info info;
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
    CHECK_MPI(MPI_Win_allocate_shared(rank == 0 ? 0 : 24, 1, info, node, &mine, &win));
    CHECK_MPI(MPI_Info_free(&info));
    long page = sysconf(_SC_PAGESIZE);
    for (int r = 1; r < size; r++) {
        char *p;
        CHECK_MPI(MPI_Win_shared_query(win, r, &sz, &du, &p));
        CHECK(sz == 24 && ((uintptr_t)p % (uintptr_t)page) == 0, "noncontig part %d at %p", r,
              (void *)p);
    }
    if (size > 1) {
        char *p1, *pq;
        CHECK_MPI(MPI_Win_shared_query(win, 1, &sz, &du, &p1));
        CHECK_MPI(MPI_Win_shared_query(win, MPI_PROC_NULL, &sz, &du, &pq));
        CHECK(pq == p1 && sz == 24, "MPI_PROC_NULL skips the empty part of rank 0");
    }
    CHECK_MPI(MPI_Win_free(&win));
}

static void fence_ops(MPI_Comm node, int rank, int size)
{
    int slots = 16 + 2 * size;
    long *mem;
    MPI_Win win;
    CHECK_MPI(MPI_Win_allocate_shared(slots * sizeof(long), sizeof(long), MPI_INFO_NULL, node,
                                      &mem, &win));
    for (int i = 0; i < slots; i++)
        mem[i] = 0;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    CHECK_MPI(MPI_Win_fence(0, win));
    long v = 100 + rank;
    CHECK_MPI(MPI_Put(&v, 1, MPI_LONG, right, 16 + rank, 1, MPI_LONG, win));
    /* Every rank adds 1, 2, 3, 4 to slots 0, 2, 4, 6 of rank 0 through a vector type. */
    MPI_Datatype every_other;
    CHECK_MPI(MPI_Type_vector(4, 1, 2, MPI_LONG, &every_other));
    CHECK_MPI(MPI_Type_commit(&every_other));
    long add[4] = {1, 2, 3, 4};
    CHECK_MPI(MPI_Accumulate(add, 4, MPI_LONG, 0, 0, 1, every_other, MPI_SUM, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK(mem[16 + left] == 100 + left, "put from the left: %ld", mem[16 + left]);
    if (rank == 0)
        for (int k = 0; k < 4; k++)
            CHECK(mem[2 * k] == (long)size * (k + 1) && mem[2 * k + 1] == 0,
                  "vector accumulate slot %d: %ld", 2 * k, mem[2 * k]);
    long got = -1;
    CHECK_MPI(MPI_Get(&got, 1, MPI_LONG, left, 16 + ((left + size - 1) % size), 1, MPI_LONG, win));
    /* One compare-and-swap wins slot 9 of rank 0. */
    long mine_ = rank + 1, zero = 0, old = -1;
    CHECK_MPI(MPI_Compare_and_swap(&mine_, &zero, &old, MPI_LONG, 0, 9, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK(got == 100 + (left + size - 1) % size, "get from the left: %ld", got);
    int won = old == 0, winners = 0;
    CHECK(old == 0 || (old >= 1 && old <= size), "compare-and-swap saw %ld", old);
    CHECK_MPI(MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, node));
    CHECK(winners == 1, "%d compare-and-swap winners", winners);
    /* Get_accumulate: an atomic read, then a swap. */
    long seen = -1, swapped = -1, nv = 7;
    CHECK_MPI(MPI_Get_accumulate(NULL, 0, MPI_LONG, &seen, 1, MPI_LONG, 0, 9, 1, MPI_LONG,
                                 MPI_NO_OP, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK(seen >= 1 && seen <= size, "atomic read %ld", seen);
    if (rank == size - 1)
        CHECK_MPI(MPI_Get_accumulate(&nv, 1, MPI_LONG, &swapped, 1, MPI_LONG, 0, 9, 1, MPI_LONG,
                                     MPI_REPLACE, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    if (rank == size - 1)
        CHECK(swapped == seen, "swap returned %ld, not %ld", swapped, seen);
    if (rank == 0)
        CHECK(mem[9] == 7, "after the swap: %ld", mem[9]);
    /* MINLOC on a pair in slots 12..13 of rank 0 (a long_int pair fits two longs). */
    struct {
        long v;
        int i;
    } pair = {1000 - rank, rank}, init = {1 << 30, -1};
    if (rank == 0)
        memcpy(&mem[12], &init, sizeof init);
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Accumulate(&pair, 1, MPI_LONG_INT, 0, 12, 1, MPI_LONG_INT, MPI_MINLOC, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    if (rank == 0) {
        memcpy(&pair, &mem[12], sizeof pair);
        CHECK(pair.v == 1000 - (size - 1) && pair.i == size - 1, "minloc %ld at %d", pair.v,
              pair.i);
    }
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    CHECK_MPI(MPI_Type_free(&every_other));
    CHECK_MPI(MPI_Win_free(&win));
}

static void passive_ops(MPI_Comm node, int rank, int size)
{
    int slots = 8 + size;
    long *mem;
    MPI_Win win;
    CHECK_MPI(MPI_Win_allocate_shared(slots * sizeof(long), sizeof(long), MPI_INFO_NULL, node,
                                      &mem, &win));
    for (int i = 0; i < slots; i++)
        mem[i] = 0;
    CHECK_MPI(MPI_Barrier(node));

    /* Read-modify-write under exclusive locks. */
    for (int i = 0; i < ITER; i++) {
        long v = -1;
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        CHECK_MPI(MPI_Get(&v, 1, MPI_LONG, 0, 0, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_flush(0, win));
        v += 1;
        CHECK_MPI(MPI_Put(&v, 1, MPI_LONG, 0, 0, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_unlock(0, win));
    }
    CHECK_MPI(MPI_Barrier(node));
    if (rank == 0) {
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        CHECK(mem[0] == (long)size * ITER, "counter %ld after %d increments", mem[0], size * ITER);
        CHECK_MPI(MPI_Win_unlock(0, win));
    }

    /* Fetch_and_op tickets at the last rank: distinct, and the counter exact. */
    int last = size - 1;
    long tickets[ITER];
    CHECK_MPI(MPI_Win_lock_all(0, win));
    for (int i = 0; i < ITER; i++) {
        long one = 1;
        CHECK_MPI(MPI_Fetch_and_op(&one, &tickets[i], MPI_LONG, last, 1, MPI_SUM, win));
        CHECK_MPI(MPI_Win_flush(last, win));
    }
    for (int i = 1; i < ITER; i++)
        CHECK(tickets[i] > tickets[i - 1], "tickets not increasing: %ld then %ld", tickets[i - 1],
              tickets[i]);
    /* Request-based put and get to the right neighbour. */
    int right = (rank + 1) % size;
    long v = 5000 + rank, back = -1;
    MPI_Request reqs[2];
    CHECK_MPI(MPI_Rput(&v, 1, MPI_LONG, right, 8 + rank, 1, MPI_LONG, win, &reqs[0]));
    CHECK_MPI(MPI_Wait(&reqs[0], MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Win_flush(right, win));
    CHECK_MPI(MPI_Rget(&back, 1, MPI_LONG, right, 8 + rank, 1, MPI_LONG, win, &reqs[1]));
    CHECK_MPI(MPI_Wait(&reqs[1], MPI_STATUS_IGNORE));
    CHECK(back == v, "rget after rput: %ld", back);
    CHECK_MPI(MPI_Win_unlock_all(win));
    long all[ITER * 8];
    CHECK(size <= 8, "at most 8 ranks");
    CHECK_MPI(MPI_Allgather(tickets, ITER, MPI_LONG, all, ITER, MPI_LONG, node));
    if (rank == last) {
        CHECK(mem[1] == (long)size * ITER, "ticket counter %ld", mem[1]);
        char seen[ITER * 8] = {0};
        for (int i = 0; i < size * ITER; i++) {
            CHECK(all[i] >= 0 && all[i] < size * ITER && !seen[all[i]], "ticket %ld twice",
                  all[i]);
            seen[all[i]] = 1;
        }
    }

    /* Post/start/complete/wait: every other rank puts into rank 0. */
    MPI_Group world, zero, others;
    CHECK_MPI(MPI_Comm_group(node, &world));
    int z = 0;
    CHECK_MPI(MPI_Group_incl(world, 1, &z, &zero));
    CHECK_MPI(MPI_Group_excl(world, 1, &z, &others));
    if (rank == 0) {
        CHECK_MPI(MPI_Win_post(others, 0, win));
        CHECK_MPI(MPI_Win_wait(win));
        for (int r = 1; r < size; r++)
            CHECK(mem[8 + r] == 9000 + r, "pscw put from %d: %ld", r, mem[8 + r]);
    } else {
        long w = 9000 + rank;
        CHECK_MPI(MPI_Win_start(zero, 0, win));
        CHECK_MPI(MPI_Put(&w, 1, MPI_LONG, 0, 8 + rank, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_complete(win));
    }
    CHECK_MPI(MPI_Group_free(&world));
    CHECK_MPI(MPI_Group_free(&zero));
    CHECK_MPI(MPI_Group_free(&others));
    CHECK_MPI(MPI_Win_free(&win));
}

/* Rank 0 calls no MPI function while the others operate on its memory. */
static void no_target_progress(MPI_Comm node, int rank, int size)
{
    int slots = 1 + size;
    long *mem;
    MPI_Win win;
    CHECK_MPI(MPI_Win_allocate_shared(slots * sizeof(long), sizeof(long), MPI_INFO_NULL, node,
                                      &mem, &win));
    for (int i = 0; i < slots; i++)
        mem[i] = 0;
    CHECK_MPI(MPI_Barrier(node));
    if (rank == 0) {
        volatile long *m = mem;
        int waited_ms = 0;
        for (;;) {
            __sync_synchronize();
            int arrived = m[0] == (long)(size - 1) * ITER;
            for (int r = 1; r < size; r++)
                arrived = arrived && m[1 + r] == 7000 + r;
            if (arrived)
                break;
            CHECK(waited_ms < 60000,
                  "after %d ms without MPI calls the data has not arrived (counter %ld)",
                  waited_ms, m[0]);
            test_sleep_ms(2);
            waited_ms += 2;
        }
    } else {
        long v = 7000 + rank;
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        CHECK_MPI(MPI_Put(&v, 1, MPI_LONG, 0, 1 + rank, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_unlock(0, win));
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        for (int i = 0; i < ITER; i++) {
            long one = 1, old;
            CHECK_MPI(MPI_Fetch_and_op(&one, &old, MPI_LONG, 0, 0, MPI_SUM, win));
        }
        CHECK_MPI(MPI_Win_unlock(0, win));
    }
    CHECK_MPI(MPI_Barrier(node));
    CHECK_MPI(MPI_Win_free(&win));
}

static void one_process(void)
{
    double *mem;
    MPI_Win win;
    CHECK_MPI(MPI_Win_allocate_shared(4 * sizeof(double), sizeof(double), MPI_INFO_NULL,
                                      MPI_COMM_SELF, &mem, &win));
    mem[0] = 1.5;
    CHECK_MPI(MPI_Win_fence(0, win));
    double two = 2.0, got = 0;
    CHECK_MPI(MPI_Accumulate(&two, 1, MPI_DOUBLE, 0, 0, 1, MPI_DOUBLE, MPI_SUM, win));
    CHECK_MPI(MPI_Get(&got, 1, MPI_DOUBLE, 0, 0, 1, MPI_DOUBLE, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK(got == 3.5 && mem[0] == 3.5, "self window: %g %g", got, mem[0]);
    MPI_Aint sz;
    int du;
    double *p;
    CHECK_MPI(MPI_Win_shared_query(win, 0, &sz, &du, &p));
    CHECK(p == mem && sz == 4 * (MPI_Aint)sizeof(double), "self query");
    CHECK_MPI(MPI_Win_free(&win));
}

int main(int argc, char **argv)
{
    int rank, size, nsize;
    MPI_Init(&argc, &argv);
    test_begin("rma_shared");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm node;
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    CHECK_MPI(MPI_Comm_size(node, &nsize));
    CHECK(nsize == size, "the test runs on one node (%d of %d ranks here)", nsize, size);

    layout(node, rank, size);
    fence_ops(node, rank, size);
    passive_ops(node, rank, size);
    no_target_progress(node, rank, size);
    one_process();

    CHECK_MPI(MPI_Comm_free(&node));
    return test_end();
}
