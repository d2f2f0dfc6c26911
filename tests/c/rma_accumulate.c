/*
 * rma_accumulate.c - accumulates and derived datatypes on both sides.
 *
 * Target side strided (a vector type), origin side contiguous and the other way round; an
 * indexed origin for a put; a get into a vector origin; MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN,
 * MPI_BAND, MPI_BOR, MPI_BXOR, MPI_LAND, MPI_REPLACE on ints and doubles; MPI_Get_accumulate
 * with MPI_NO_OP (an atomic read) and MPI_SUM (fetch then add); MPI_MINLOC and MPI_MAXLOC on
 * MPI_DOUBLE_INT; one accumulate of 100 000 doubles (past every eager limit, as one atomic
 * message); and a user-defined operation refused with MPI_ERR_OP.
 */
#include "stormtest.h"

#define N 16
#define BIG 100000

static void user_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)in;
    (void)inout;
    (void)len;
    (void)dt;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    test_begin("rma_accumulate");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* Window: N*2 ints, then N*2 doubles, then 2 double_int pairs (aligned as a struct). */
    struct {
        int ints[2 * N];
        double dbls[2 * N];
        struct {
            double v;
            int i;
        } pairs[2];
        double big[BIG];
    } *w;
    MPI_Win win;
    CHECK_MPI(MPI_Win_allocate(sizeof *w, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w, &win));
    for (int i = 0; i < 2 * N; i++) {
        w->ints[i] = 1;
        w->dbls[i] = 1.0;
    }
    w->pairs[0].v = 1e9;
    w->pairs[0].i = -1;
    w->pairs[1].v = -1e9;
    w->pairs[1].i = -1;
    for (int i = 0; i < BIG; i++)
        w->big[i] = 0.0;
    MPI_Aint ints_at = 0, dbls_at = (char *)w->dbls - (char *)w, pairs_at = (char *)w->pairs - (char *)w,
             big_at = (char *)w->big - (char *)w;

    MPI_Datatype every_other_int, every_other_dbl;
    CHECK_MPI(MPI_Type_vector(N, 1, 2, MPI_INT, &every_other_int));
    CHECK_MPI(MPI_Type_commit(&every_other_int));
    CHECK_MPI(MPI_Type_vector(N, 1, 2, MPI_DOUBLE, &every_other_dbl));
    CHECK_MPI(MPI_Type_commit(&every_other_dbl));

    /* Everyone adds (rank+1) to the even ints at rank 0 (target strided, origin contiguous), and
     * multiplies the odd doubles by 2 (origin strided too). */
    int add[N];
    double two[2 * N];
    for (int i = 0; i < N; i++)
        add[i] = rank + 1;
    for (int i = 0; i < 2 * N; i++)
        two[i] = 2.0;
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Accumulate(add, N, MPI_INT, 0, ints_at, 1, every_other_int, MPI_SUM, win));
    CHECK_MPI(MPI_Accumulate(two, 1, every_other_dbl, 0, dbls_at + sizeof(double), 1,
                             every_other_dbl, MPI_PROD, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    if (rank == 0) {
        int sum = size * (size + 1) / 2;
        for (int i = 0; i < 2 * N; i++) {
            int want = i % 2 == 0 ? 1 + sum : 1;
            CHECK(w->ints[i] == want, "ints[%d] = %d, expected %d", i, w->ints[i], want);
            double dw = i % 2 == 1 ? (double)(1 << size) : 1.0;
            CHECK(w->dbls[i] == dw, "dbls[%d] = %g, expected %g", i, w->dbls[i], dw);
        }
    }
    CHECK_MPI(MPI_Win_fence(0, win));

    /* Bitwise and logical ops, MAX/MIN, REPLACE, each at its own slot of the last rank. */
    int last = size - 1;
    int bit = 1 << (rank % 30);
    if (rank == last)
        for (int i = 0; i < 2 * N; i++)
            w->ints[i] = i == 1 ? -1 : 0;
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Accumulate(&bit, 1, MPI_INT, last, 0, 1, MPI_INT, MPI_BOR, win));
    CHECK_MPI(MPI_Accumulate(&bit, 1, MPI_INT, last, sizeof(int), 1, MPI_INT, MPI_BAND, win));
    CHECK_MPI(MPI_Accumulate(&bit, 1, MPI_INT, last, 2 * sizeof(int), 1, MPI_INT, MPI_BXOR, win));
    int r = rank;
    CHECK_MPI(MPI_Accumulate(&r, 1, MPI_INT, last, 3 * sizeof(int), 1, MPI_INT, MPI_MAX, win));
    int neg = -rank;
    CHECK_MPI(MPI_Accumulate(&neg, 1, MPI_INT, last, 4 * sizeof(int), 1, MPI_INT, MPI_MIN, win));
    int t = 1;
    CHECK_MPI(MPI_Accumulate(&t, 1, MPI_INT, last, 5 * sizeof(int), 1, MPI_INT, MPI_LOR, win));
    CHECK_MPI(MPI_Accumulate(&t, 1, MPI_INT, last, 6 * sizeof(int), 1, MPI_INT, MPI_LAND, win));
    int seven = 7;
    CHECK_MPI(MPI_Accumulate(&seven, 1, MPI_INT, last, 7 * sizeof(int), 1, MPI_INT, MPI_REPLACE,
                             win));
    CHECK_MPI(MPI_Win_fence(0, win));
    if (rank == last) {
        int bor = 0, band = -1, bxor = 0;
        for (int k = 0; k < size; k++) {
            bor |= 1 << (k % 30);
            band &= 1 << (k % 30);
            bxor ^= 1 << (k % 30);
        }
        CHECK(w->ints[0] == bor, "BOR %d, expected %d", w->ints[0], bor);
        CHECK(w->ints[1] == band, "BAND %d, expected %d", w->ints[1], band);
        CHECK(w->ints[2] == bxor, "BXOR %d, expected %d", w->ints[2], bxor);
        CHECK(w->ints[3] == size - 1, "MAX %d", w->ints[3]);
        CHECK(w->ints[4] == -(size - 1), "MIN %d", w->ints[4]);
        CHECK(w->ints[5] == 1, "LOR %d", w->ints[5]);
        CHECK(w->ints[6] == 0, "LAND %d (0 && 1...)", w->ints[6]);
        CHECK(w->ints[7] == 7, "REPLACE %d", w->ints[7]);
    }

    /* Get_accumulate: fetch-and-add on a double at rank 0, one per rank; the fetched values are
     * distinct partial sums. NO_OP reads. */
    if (rank == 0)
        w->dbls[0] = 0.0;
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Win_lock_all(0, win));
    double inc = 1.0, old = -1.0;
    CHECK_MPI(MPI_Get_accumulate(&inc, 1, MPI_DOUBLE, &old, 1, MPI_DOUBLE, 0, dbls_at, 1,
                                 MPI_DOUBLE, MPI_SUM, win));
    CHECK_MPI(MPI_Win_flush(0, win));
    CHECK(old >= 0.0 && old < size, "fetched %g", old);
    CHECK_MPI(MPI_Win_unlock_all(win));
    double *olds = malloc(sizeof(double) * size);
    CHECK_MPI(MPI_Allgather(&old, 1, MPI_DOUBLE, olds, 1, MPI_DOUBLE, MPI_COMM_WORLD));
    for (int i = 0; i < size; i++)
        for (int j = i + 1; j < size; j++)
            CHECK(olds[i] != olds[j], "ranks %d and %d fetched the same %g", i, j, olds[i]);
    free(olds);
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    double now = -1;
    CHECK_MPI(MPI_Get_accumulate(NULL, 0, MPI_DOUBLE, &now, 1, MPI_DOUBLE, 0, dbls_at, 1,
                                 MPI_DOUBLE, MPI_NO_OP, win));
    CHECK_MPI(MPI_Win_unlock(0, win));
    CHECK(now == (double)size, "NO_OP read %g, expected %d", now, size);

    /* Put with an indexed origin type, get into a vector origin type. */
    int src[8] = {10, 11, 12, 13, 14, 15, 16, 17};
    int lens[2] = {2, 1}, disps[2] = {1, 5};
    MPI_Datatype idx;
    CHECK_MPI(MPI_Type_indexed(2, lens, disps, MPI_INT, &idx));
    CHECK_MPI(MPI_Type_commit(&idx));
    int dst = (rank + 1) % size;
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Put(src, 1, idx, dst, 8 * sizeof(int), 3, MPI_INT, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK(w->ints[8] == 11 && w->ints[9] == 12 && w->ints[10] == 15,
          "indexed put gave %d %d %d", w->ints[8], w->ints[9], w->ints[10]);
    int gathered[2 * 3];
    for (int i = 0; i < 6; i++)
        gathered[i] = -1;
    MPI_Datatype ev3;
    CHECK_MPI(MPI_Type_vector(3, 1, 2, MPI_INT, &ev3));
    CHECK_MPI(MPI_Type_commit(&ev3));
    CHECK_MPI(MPI_Get(gathered, 1, ev3, dst, 8 * sizeof(int), 3, MPI_INT, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK(gathered[0] == 11 && gathered[1] == -1 && gathered[2] == 12 && gathered[4] == 15,
          "vector get gave %d %d %d %d", gathered[0], gathered[1], gathered[2], gathered[4]);

    /* MINLOC / MAXLOC on MPI_DOUBLE_INT at rank 0. */
    struct {
        double v;
        int i;
    } p = {(double)(rank % 3), rank};
    CHECK_MPI(MPI_Accumulate(&p, 1, MPI_DOUBLE_INT, 0, pairs_at, 1, MPI_DOUBLE_INT, MPI_MINLOC,
                             win));
    CHECK_MPI(MPI_Accumulate(&p, 1, MPI_DOUBLE_INT, 0, pairs_at + sizeof w->pairs[0], 1,
                             MPI_DOUBLE_INT, MPI_MAXLOC, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    if (rank == 0) {
        CHECK(w->pairs[0].v == 0.0 && w->pairs[0].i == 0, "MINLOC (%g, %d)", w->pairs[0].v,
              w->pairs[0].i);
        double maxv = size >= 3 ? 2.0 : (double)(size - 1);
        int maxi = size >= 3 ? 2 : size - 1;
        CHECK(w->pairs[1].v == maxv && w->pairs[1].i == maxi, "MAXLOC (%g, %d)", w->pairs[1].v,
              w->pairs[1].i);
    }

    /* One large accumulate per rank into rank 0. */
    double *ones = malloc(sizeof(double) * BIG);
    for (int i = 0; i < BIG; i++)
        ones[i] = (double)(i % 7);
    CHECK_MPI(MPI_Accumulate(ones, BIG, MPI_DOUBLE, 0, big_at, BIG, MPI_DOUBLE, MPI_SUM, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    if (rank == 0)
        for (int i = 0; i < BIG; i++)
            CHECK(w->big[i] == (double)(i % 7) * size, "big[%d] = %g", i, w->big[i]);
    free(ones);

    /* A user-defined operation is refused. */
    MPI_Op uop;
    CHECK_MPI(MPI_Op_create(user_fn, 1, &uop));
    CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    int cls = 0;
    MPI_Error_class(MPI_Accumulate(&r, 1, MPI_INT, 0, 0, 1, MPI_INT, uop, win), &cls);
    CHECK(cls == MPI_ERR_OP, "a user-defined op gave class %d", cls);
    /* Origin and target of different sizes. */
    MPI_Error_class(MPI_Accumulate(add, 2, MPI_INT, 0, 0, 1, MPI_INT, MPI_SUM, win), &cls);
    CHECK(cls != MPI_SUCCESS, "an accumulate of 2 ints into 1 succeeded");
    /* MPI_SUM on MPI_BYTE: refused with something to add, a no-op with nothing (as Open MPI and
     * MPICH take mpi4py's zero-count Get_accumulate). */
    {
        unsigned char o = 1, res = 0;
        MPI_Error_class(MPI_Get_accumulate(&o, 1, MPI_BYTE, &res, 1, MPI_BYTE, 0, 0, 1, MPI_BYTE,
                                           MPI_SUM, win), &cls);
        CHECK(cls == MPI_ERR_OP, "MPI_SUM of one MPI_BYTE gave class %d", cls);
        CHECK_MPI(MPI_Get_accumulate(&o, 0, MPI_BYTE, &res, 0, MPI_BYTE, 0, 0, 0, MPI_BYTE,
                                     MPI_SUM, win));
    }
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    MPI_Op_free(&uop);

    MPI_Type_free(&idx);
    MPI_Type_free(&ev3);
    MPI_Type_free(&every_other_int);
    MPI_Type_free(&every_other_dbl);
    CHECK_MPI(MPI_Win_free(&win));
    return test_end();
}
