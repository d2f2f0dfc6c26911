/*
 * rma_lean.c - the lean path of MPI_Win_allocate windows (on one node: a shared segment reached
 * by loads, stores and CPU atomics, straight from the C binding): what it does and what it must
 * still refuse.
 *
 * Every rank works on its right neighbour's window under MPI_Win_lock_all: puts and gets of one
 * long, of three bytes and of two MPI_DOUBLE_INT (a pair type with a gap: 16-byte elements of 12
 * bytes, which must not move as 24 dense bytes); a put from the window into itself; accumulates
 * of three doubles and of three ints; MPI_Fetch_and_op with MPI_SUM and MPI_NO_OP; compare-and-
 * swap of an int; each checked after a flush. The request-based forms (MPI_Rput, MPI_Rget,
 * MPI_Raccumulate, MPI_Rget_accumulate: a request complete at once, on the lean path), the
 * large-count forms (MPI_Put_c, MPI_Get_c, MPI_Accumulate_c, MPI_Get_accumulate_c),
 * MPI_Get_accumulate with MPI_NO_OP and MPI_Fetch_and_op with MPI_REPLACE on an int, each
 * checked by value. Then the errors the standard requires, with
 * MPI_ERRORS_RETURN: every operation and MPI_Win_flush outside an epoch is MPI_ERR_RMA_SYNC; a
 * displacement past or before the target's part MPI_ERR_RMA_RANGE; a rank out of range
 * MPI_ERR_RANK (for MPI_Win_flush too); MPI_DATATYPE_NULL MPI_ERR_TYPE; a negative count
 * MPI_ERR_COUNT; a NULL origin buffer MPI_ERR_BUFFER; MPI_BAND on doubles MPI_ERR_OP; a
 * request-based operation in a fence epoch MPI_ERR_RMA_SYNC and one without a request handle
 * MPI_ERR_ARG; and the target's memory is unchanged by every refused call. Last, 12 KiB puts and
 * gets through a buffer 16 bytes into a page and an overlapping put within the window.
 */
#include "stormtest.h"

#define SLOTS 24

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    test_begin("rma_lean");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;

    long *mem;
    MPI_Win win;
    CHECK_MPI(MPI_Win_allocate(SLOTS * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD,
                               &mem, &win));
    for (int i = 0; i < SLOTS; i++)
        mem[i] = 0;
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* 1. What the lean path does. */
    CHECK_MPI(MPI_Win_lock_all(0, win));
    long v = 1000 + rank, back = -1;
    CHECK_MPI(MPI_Put(&v, 1, MPI_LONG, right, 0, 1, MPI_LONG, win));
    CHECK_MPI(MPI_Win_flush(right, win));
    CHECK_MPI(MPI_Get(&back, 1, MPI_LONG, right, 0, 1, MPI_LONG, win));
    CHECK_MPI(MPI_Win_flush(right, win));
    CHECK(back == v, "MPI_Get read %ld after MPI_Put of %ld", back, v);

    char three[3] = {'a', 'b', (char)('c' + rank)}, three_back[3] = {0, 0, 0};
    CHECK_MPI(MPI_Put(three, 3, MPI_CHAR, right, 1, 3, MPI_CHAR, win));
    CHECK_MPI(MPI_Win_flush(right, win));
    CHECK_MPI(MPI_Get(three_back, 3, MPI_CHAR, right, 1, 3, MPI_CHAR, win));
    CHECK_MPI(MPI_Win_flush(right, win));
    CHECK(memcmp(three, three_back, 3) == 0, "three bytes came back as %.3s", three_back);

    /* Two MPI_DOUBLE_INT at slot 2 (bytes 16..48): the ints sit 12 bytes into each element. */
    struct { double d; int i; } pair[2] = {{1.5, 7 + rank}, {2.5, 9 + rank}}, pair_back[2];
    memset(pair_back, 0, sizeof pair_back);
    CHECK_MPI(MPI_Put(pair, 2, MPI_DOUBLE_INT, right, 2, 2, MPI_DOUBLE_INT, win));
    CHECK_MPI(MPI_Win_flush(right, win));
    CHECK_MPI(MPI_Get(pair_back, 2, MPI_DOUBLE_INT, right, 2, 2, MPI_DOUBLE_INT, win));
    CHECK_MPI(MPI_Win_flush(right, win));
    CHECK(pair_back[0].d == 1.5 && pair_back[0].i == 7 + rank && pair_back[1].d == 2.5 &&
              pair_back[1].i == 9 + rank,
          "two MPI_DOUBLE_INT came back as (%g, %d), (%g, %d)", pair_back[0].d, pair_back[0].i,
          pair_back[1].d, pair_back[1].i);

    /* Accumulates of three doubles (slots 6..8) and three ints (slot 9, 12 bytes), fetch-and-op
     * at slot 11, compare-and-swap of an int at slot 12. */
    double d3[3] = {0.5, 1.0, 2.0};
    int i3[3] = {1, 2, 3};
    CHECK_MPI(MPI_Accumulate(d3, 3, MPI_DOUBLE, right, 6, 3, MPI_DOUBLE, MPI_SUM, win));
    CHECK_MPI(MPI_Accumulate(d3, 3, MPI_DOUBLE, right, 6, 3, MPI_DOUBLE, MPI_SUM, win));
    CHECK_MPI(MPI_Accumulate(i3, 3, MPI_INT, right, 9, 3, MPI_INT, MPI_SUM, win));
    CHECK_MPI(MPI_Accumulate(i3, 3, MPI_INT, right, 9, 3, MPI_INT, MPI_MAX, win));
    long one = 1, old = -1;
    CHECK_MPI(MPI_Fetch_and_op(&one, &old, MPI_LONG, right, 11, MPI_SUM, win));
    CHECK_MPI(MPI_Win_flush(right, win));
    CHECK(old == 0, "the first MPI_Fetch_and_op fetched %ld", old);
    CHECK_MPI(MPI_Fetch_and_op(NULL, &old, MPI_LONG, right, 11, MPI_NO_OP, win));
    CHECK_MPI(MPI_Win_flush(right, win));
    CHECK(old == 1, "MPI_NO_OP fetched %ld after one MPI_SUM of 1", old);
    int expect = 0, swap = 42, was = -1;
    CHECK_MPI(MPI_Compare_and_swap(&swap, &expect, &was, MPI_INT, right, 12, win));
    CHECK_MPI(MPI_Win_flush(right, win));
    CHECK(was == 0, "the first compare-and-swap found %d", was);
    CHECK_MPI(MPI_Compare_and_swap(&swap, &expect, &was, MPI_INT, right, 12, win));
    CHECK_MPI(MPI_Win_flush(right, win));
    CHECK(was == 42, "the second compare-and-swap found %d", was);

    /* Request-based forms (slots 16..18): complete at once, MPI_Wait frees them. */
    MPI_Request req = MPI_REQUEST_NULL;
    long rv = 2000 + rank, rback = -1;
    CHECK_MPI(MPI_Rput(&rv, 1, MPI_LONG, right, 16, 1, MPI_LONG, win, &req));
    CHECK(req != MPI_REQUEST_NULL, "MPI_Rput gave no request");
    CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK(req == MPI_REQUEST_NULL, "MPI_Wait left MPI_Rput's request");
    CHECK_MPI(MPI_Rget(&rback, 1, MPI_LONG, right, 16, 1, MPI_LONG, win, &req));
    CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK(rback == rv, "MPI_Rget read %ld after MPI_Rput of %ld", rback, rv);
    int two[2] = {3, 4};
    CHECK_MPI(MPI_Raccumulate(two, 2, MPI_INT, right, 17, 2, MPI_INT, MPI_SUM, win, &req));
    CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Raccumulate(two, 2, MPI_INT, right, 17, 2, MPI_INT, MPI_SUM, win, &req));
    int flag = 0;
    CHECK_MPI(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
    CHECK(flag, "MPI_Raccumulate's request was not complete at once");
    long five = 5, got = -1;
    CHECK_MPI(MPI_Rget_accumulate(&five, 1, MPI_LONG, &got, 1, MPI_LONG, right, 18, 1, MPI_LONG,
                                  MPI_SUM, win, &req));
    CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK(got == 0, "MPI_Rget_accumulate fetched %ld", got);
    CHECK_MPI(MPI_Get_accumulate(NULL, 0, MPI_LONG, &got, 1, MPI_LONG, right, 18, 1, MPI_LONG,
                                 MPI_NO_OP, win));
    /* The result is the caller's after the flush (the lean path has it at once). */
    CHECK_MPI(MPI_Win_flush(right, win));
    CHECK(got == 5, "MPI_Get_accumulate with MPI_NO_OP fetched %ld after a sum of 5", got);

    /* Large-count forms (slots 19..20), and MPI_REPLACE on an int (slot 21). */
    MPI_Count c1 = 1;
    long cv = 3000 + rank, cback = -1, cold = -1;
    CHECK_MPI(MPI_Put_c(&cv, c1, MPI_LONG, right, 19, c1, MPI_LONG, win));
    CHECK_MPI(MPI_Win_flush(right, win));
    CHECK_MPI(MPI_Get_c(&cback, c1, MPI_LONG, right, 19, c1, MPI_LONG, win));
    CHECK_MPI(MPI_Win_flush(right, win));
    CHECK(cback == cv, "MPI_Get_c read %ld after MPI_Put_c of %ld", cback, cv);
    CHECK_MPI(MPI_Accumulate_c(&cv, c1, MPI_LONG, right, 20, c1, MPI_LONG, MPI_SUM, win));
    CHECK_MPI(MPI_Get_accumulate_c(&cv, c1, MPI_LONG, &cold, c1, MPI_LONG, right, 20, c1,
                                   MPI_LONG, MPI_SUM, win));
    CHECK_MPI(MPI_Win_flush(right, win));
    CHECK(cold == cv, "MPI_Get_accumulate_c fetched %ld after one sum of %ld", cold, cv);
    int nine = 9, iold = -1;
    CHECK_MPI(MPI_Fetch_and_op(&nine, &iold, MPI_INT, right, 21, MPI_REPLACE, win));
    CHECK_MPI(MPI_Fetch_and_op(&nine, &iold, MPI_INT, right, 21, MPI_REPLACE, win));
    CHECK_MPI(MPI_Win_flush(right, win));
    CHECK(iold == 9, "MPI_REPLACE on an int fetched %d the second time", iold);
    CHECK_MPI(MPI_Win_unlock_all(win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* What the left neighbour left here. */
    CHECK(mem[0] == 1000 + left, "slot 0 is %ld, expected %d", mem[0], 1000 + left);
    double *dm = (double *)&mem[6];
    CHECK(dm[0] == 1.0 && dm[1] == 2.0 && dm[2] == 4.0, "accumulated doubles %g %g %g", dm[0],
          dm[1], dm[2]);
    int *im = (int *)&mem[9];
    CHECK(im[0] == 1 && im[1] == 2 && im[2] == 3, "accumulated ints %d %d %d", im[0], im[1],
          im[2]);
    CHECK(mem[11] == 1, "the fetch-and-op counter is %ld", mem[11]);
    CHECK(*(int *)&mem[12] == 42, "the compare-and-swap slot is %d", *(int *)&mem[12]);
    CHECK(mem[16] == 2000 + left, "the MPI_Rput slot is %ld", mem[16]);
    CHECK(((int *)&mem[17])[0] == 6 && ((int *)&mem[17])[1] == 8, "MPI_Raccumulate left %d %d",
          ((int *)&mem[17])[0], ((int *)&mem[17])[1]);
    CHECK(mem[18] == 5, "the MPI_Rget_accumulate slot is %ld", mem[18]);
    CHECK(mem[19] == 3000 + left, "the MPI_Put_c slot is %ld", mem[19]);
    CHECK(mem[20] == 2 * (3000 + left), "the MPI_Accumulate_c slot is %ld", mem[20]);
    CHECK(*(int *)&mem[21] == 9, "the MPI_REPLACE slot is %d", *(int *)&mem[21]);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* A put from the window into itself (slot 0 to slot 13, at this rank). */
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    CHECK_MPI(MPI_Put(&mem[0], 1, MPI_LONG, rank, 13, 1, MPI_LONG, win));
    CHECK_MPI(MPI_Win_unlock(rank, win));
    CHECK(mem[13] == 1000 + left, "a put from the window into itself left %ld", mem[13]);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* 2. Errors. */
    CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    int cls = 0;
    long x = 77, r = 0;
    double dx = 1.0;
    int ix = 1, ir = 0;
    MPI_Error_class(MPI_Put(&x, 1, MPI_LONG, right, 14, 1, MPI_LONG, win), &cls);
    CHECK(cls == MPI_ERR_RMA_SYNC, "a put outside an epoch gave class %d", cls);
    MPI_Error_class(MPI_Get(&r, 1, MPI_LONG, right, 14, 1, MPI_LONG, win), &cls);
    CHECK(cls == MPI_ERR_RMA_SYNC, "a get outside an epoch gave class %d", cls);
    MPI_Error_class(MPI_Accumulate(&x, 1, MPI_LONG, right, 14, 1, MPI_LONG, MPI_SUM, win), &cls);
    CHECK(cls == MPI_ERR_RMA_SYNC, "an accumulate outside an epoch gave class %d", cls);
    MPI_Error_class(MPI_Fetch_and_op(&x, &r, MPI_LONG, right, 14, MPI_SUM, win), &cls);
    CHECK(cls == MPI_ERR_RMA_SYNC, "a fetch-and-op outside an epoch gave class %d", cls);
    MPI_Error_class(MPI_Compare_and_swap(&ix, &ix, &ir, MPI_INT, right, 14, win), &cls);
    CHECK(cls == MPI_ERR_RMA_SYNC, "a compare-and-swap outside an epoch gave class %d", cls);
    MPI_Error_class(MPI_Win_flush(right, win), &cls);
    CHECK(cls == MPI_ERR_RMA_SYNC, "a flush outside an epoch gave class %d", cls);

    /* Request-based operations belong to passive-target epochs only. */
    MPI_Request rq = MPI_REQUEST_NULL;
    CHECK_MPI(MPI_Win_fence(0, win));
    MPI_Error_class(MPI_Rput(&x, 1, MPI_LONG, right, 14, 1, MPI_LONG, win, &rq), &cls);
    CHECK(cls == MPI_ERR_RMA_SYNC, "MPI_Rput in a fence epoch gave class %d", cls);
    MPI_Error_class(MPI_Rget(&r, 1, MPI_LONG, right, 14, 1, MPI_LONG, win, &rq), &cls);
    CHECK(cls == MPI_ERR_RMA_SYNC, "MPI_Rget in a fence epoch gave class %d", cls);
    MPI_Error_class(
        MPI_Raccumulate(&x, 1, MPI_LONG, right, 14, 1, MPI_LONG, MPI_SUM, win, &rq), &cls);
    CHECK(cls == MPI_ERR_RMA_SYNC, "MPI_Raccumulate in a fence epoch gave class %d", cls);
    MPI_Error_class(MPI_Rget_accumulate(&x, 1, MPI_LONG, &r, 1, MPI_LONG, right, 14, 1, MPI_LONG,
                                        MPI_SUM, win, &rq),
                    &cls);
    CHECK(cls == MPI_ERR_RMA_SYNC, "MPI_Rget_accumulate in a fence epoch gave class %d", cls);
    CHECK(rq == MPI_REQUEST_NULL, "a refused request-based operation gave a request");
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));

    CHECK_MPI(MPI_Win_lock_all(0, win));
    MPI_Error_class(MPI_Rput(&x, 1, MPI_LONG, right, 14, 1, MPI_LONG, win, NULL), &cls);
    CHECK(cls == MPI_ERR_ARG, "MPI_Rput without a request handle gave class %d", cls);
    MPI_Error_class(MPI_Put(&x, 1, MPI_LONG, right, SLOTS, 1, MPI_LONG, win), &cls);
    CHECK(cls == MPI_ERR_RMA_RANGE, "a put past the window gave class %d", cls);
    MPI_Error_class(MPI_Put(&x, 2, MPI_LONG, right, SLOTS - 1, 2, MPI_LONG, win), &cls);
    CHECK(cls == MPI_ERR_RMA_RANGE, "a put running past the window gave class %d", cls);
    MPI_Error_class(MPI_Get(&r, 1, MPI_LONG, right, -1, 1, MPI_LONG, win), &cls);
    CHECK(cls == MPI_ERR_RMA_RANGE, "a get before the window gave class %d", cls);
    MPI_Error_class(MPI_Fetch_and_op(&x, &r, MPI_LONG, right, SLOTS, MPI_SUM, win), &cls);
    CHECK(cls == MPI_ERR_RMA_RANGE, "a fetch-and-op past the window gave class %d", cls);
    MPI_Error_class(MPI_Compare_and_swap(&ix, &ix, &ir, MPI_INT, right, -1, win), &cls);
    CHECK(cls == MPI_ERR_RMA_RANGE, "a compare-and-swap before the window gave class %d", cls);
    MPI_Error_class(MPI_Put(&x, 1, MPI_LONG, size, 14, 1, MPI_LONG, win), &cls);
    CHECK(cls == MPI_ERR_RANK, "a put to rank %d gave class %d", size, cls);
    MPI_Error_class(MPI_Fetch_and_op(&x, &r, MPI_LONG, -5, 14, MPI_SUM, win), &cls);
    CHECK(cls == MPI_ERR_RANK, "a fetch-and-op to rank -5 gave class %d", cls);
    MPI_Error_class(MPI_Win_flush(size, win), &cls);
    CHECK(cls == MPI_ERR_RANK, "a flush of rank %d gave class %d", size, cls);
    MPI_Error_class(MPI_Put(&x, 1, MPI_DATATYPE_NULL, right, 14, 1, MPI_DATATYPE_NULL, win), &cls);
    CHECK(cls == MPI_ERR_TYPE, "a put of MPI_DATATYPE_NULL gave class %d", cls);
    MPI_Error_class(MPI_Put(&x, -1, MPI_LONG, right, 14, -1, MPI_LONG, win), &cls);
    CHECK(cls == MPI_ERR_COUNT, "a put of -1 longs gave class %d", cls);
    MPI_Error_class(MPI_Put(NULL, 1, MPI_LONG, right, 14, 1, MPI_LONG, win), &cls);
    CHECK(cls == MPI_ERR_BUFFER, "a put from NULL gave class %d", cls);
    MPI_Error_class(MPI_Fetch_and_op(&x, NULL, MPI_LONG, right, 14, MPI_SUM, win), &cls);
    CHECK(cls == MPI_ERR_BUFFER, "a fetch-and-op into NULL gave class %d", cls);
    MPI_Error_class(MPI_Accumulate(&dx, 1, MPI_DOUBLE, right, 14, 1, MPI_DOUBLE, MPI_BAND, win),
                    &cls);
    CHECK(cls == MPI_ERR_OP, "MPI_BAND on a double gave class %d", cls);
    MPI_Error_class(MPI_Fetch_and_op(&dx, &dx, MPI_DOUBLE, right, 14, MPI_BAND, win), &cls);
    CHECK(cls == MPI_ERR_OP, "a fetch-and-op of MPI_BAND on a double gave class %d", cls);
    CHECK_MPI(MPI_Win_flush(right, win));
    CHECK_MPI(MPI_Win_unlock_all(win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(mem[14] == 0 && mem[15] == 0, "refused calls changed the window: %ld %ld", mem[14],
          mem[15]);

    CHECK_MPI(MPI_Win_free(&win));

    /* 3. Long copies (chunked past 2016 bytes): 12 KiB put from and got into a buffer 16 bytes
     * into a page (the distance glibc's rep movsb is slow at), and a put from the window into
     * itself overlapping by 8 bytes (memmove's, not the chunks'). */
    enum { BIG = 16384, LONGCOPY = 12288 };
    char *big;
    CHECK_MPI(MPI_Win_allocate(BIG, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &big, &win));
    memset(big, 0, BIG);
    char *page = NULL;
    CHECK(posix_memalign((void **)&page, 4096, LONGCOPY + 4096) == 0, "no memory");
    char *src = page + 16;
    for (int i = 0; i < LONGCOPY; i++)
        src[i] = (char)(i * 7 + rank);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_lock_all(0, win));
    CHECK_MPI(MPI_Put(src, LONGCOPY, MPI_BYTE, right, 0, LONGCOPY, MPI_BYTE, win));
    CHECK_MPI(MPI_Win_flush(right, win));
    memset(src, 0, LONGCOPY);
    CHECK_MPI(MPI_Get(src, LONGCOPY, MPI_BYTE, right, 0, LONGCOPY, MPI_BYTE, win));
    CHECK_MPI(MPI_Win_flush(right, win));
    int bad = -1;
    for (int i = 0; i < LONGCOPY && bad < 0; i++)
        if (src[i] != (char)(i * 7 + rank))
            bad = i;
    CHECK(bad < 0, "a 12 KiB put and get came back wrong at byte %d", bad);
    CHECK_MPI(MPI_Win_unlock_all(win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    CHECK_MPI(MPI_Put(big, LONGCOPY, MPI_BYTE, rank, 8, LONGCOPY, MPI_BYTE, win));
    CHECK_MPI(MPI_Win_unlock(rank, win));
    bad = -1;
    for (int i = 0; i < LONGCOPY && bad < 0; i++)
        if (big[8 + i] != (char)(i * 7 + left))
            bad = i;
    CHECK(bad < 0, "an overlapping put within the window came out wrong at byte %d", bad);
    free(page);
    CHECK_MPI(MPI_Win_free(&win));
    return test_end();
}
