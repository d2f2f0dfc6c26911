/*
 * rma_fence.c - one-sided communication with fences (active target).
 *
 * Over a window from MPI_Win_create and one from MPI_Win_allocate: every rank puts into the
 * next rank's window, gets from the previous one and accumulates into rank 0's, between fences,
 * and checks what arrived. Also: the window attributes (base, size, displacement unit, flavor,
 * model), MPI_Win_get_group, names, info, and that bad arguments are errors through the
 * window's error handler: an operation before any fence is MPI_ERR_RMA_SYNC, a displacement past
 * the target's window MPI_ERR_RMA_RANGE, a bad lock type MPI_ERR_LOCKTYPE.
 */
#include "stormtest.h"

#define N 64

static int deleted = 0;

static int delete_fn(MPI_Win win, int keyval, void *value, void *extra)
{
    (void)win;
    (void)keyval;
    (void)extra;
    deleted += *(int *)value;
    return MPI_SUCCESS;
}

static void check_attrs(MPI_Win win, void *base, MPI_Aint size, int unit, int flavor)
{
    void *v = NULL;
    int flag = 0;
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_BASE, &v, &flag));
    CHECK(flag && v == base, "MPI_WIN_BASE %p, expected %p", v, base);
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_SIZE, &v, &flag));
    CHECK(flag && *(MPI_Aint *)v == size, "MPI_WIN_SIZE %ld", (long)*(MPI_Aint *)v);
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &v, &flag));
    CHECK(flag && *(int *)v == unit, "MPI_WIN_DISP_UNIT %d", *(int *)v);
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &v, &flag));
    CHECK(flag && *(int *)v == flavor, "MPI_WIN_CREATE_FLAVOR %d", *(int *)v);
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_MODEL, &v, &flag));
    CHECK(flag && *(int *)v == MPI_WIN_UNIFIED, "MPI_WIN_MODEL %d", *(int *)v);
}

static void exchange(MPI_Win win, int *mem, int rank, int size)
{
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int out[N], got[N], one[N];
    for (int i = 0; i < N; i++) {
        mem[i] = 0;
        out[i] = rank * 1000 + i;
        got[i] = -1;
        one[i] = 1;
    }
    mem[N] = rank; /* slot N holds the owner's rank for gets */
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
    CHECK_MPI(MPI_Put(out, N / 2, MPI_INT, next, 0, N / 2, MPI_INT, win));
    CHECK_MPI(MPI_Get(got, 1, MPI_INT, prev, N, 1, MPI_INT, win));
    CHECK_MPI(MPI_Accumulate(one, N / 2, MPI_INT, 0, N / 2, N / 2, MPI_INT, MPI_SUM, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK(got[0] == prev, "got %d from rank %d's window, expected its rank", got[0], prev);
    for (int i = 0; i < N / 2; i++)
        CHECK(mem[i] == prev * 1000 + i, "mem[%d] = %d after the put from %d", i, mem[i], prev);
    if (rank == 0)
        for (int i = N / 2; i < N; i++)
            CHECK(mem[i] == size, "mem[%d] = %d after %d accumulates", i, mem[i], size);
    /* A second epoch on the same window: everyone replaces rank 0's first element in turn order
     * does not matter for MPI_MAX. */
    int r = rank;
    CHECK_MPI(MPI_Accumulate(&r, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_MAX, win));
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    if (rank == 0) {
        int expect = size - 1 > (size - 1) * 1000 ? size - 1 : (size - 1) * 1000;
        CHECK(mem[0] == expect, "MPI_MAX gave %d, expected %d", mem[0], expect);
    }
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    test_begin("rma_fence");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* MPI_Win_create over our own memory. */
    int *mine = malloc((N + 1) * sizeof(int));
    MPI_Win win;
    CHECK_MPI(MPI_Win_create(mine, (N + 1) * sizeof(int), sizeof(int), MPI_INFO_NULL,
                             MPI_COMM_WORLD, &win));
    check_attrs(win, mine, (N + 1) * sizeof(int), sizeof(int), MPI_WIN_FLAVOR_CREATE);
    exchange(win, mine, rank, size);

    /* Errors go to the window's handler; make them return. */
    CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    MPI_Errhandler eh;
    CHECK_MPI(MPI_Win_get_errhandler(win, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "MPI_Win_get_errhandler did not give MPI_ERRORS_RETURN");
    int x = 1, cls = 0, flag_ = 0;
    int rc = MPI_Put(&x, 1, MPI_INT, 0, 0, 1, MPI_INT, win);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RMA_SYNC, "a put outside an epoch gave class %d", cls);
    CHECK_MPI(MPI_Win_fence(0, win));
    rc = MPI_Put(&x, 1, MPI_INT, 0, N + 1, 1, MPI_INT, win);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RMA_RANGE, "a put past the window gave class %d", cls);
    rc = MPI_Put(&x, 1, MPI_INT, 0, -1, 1, MPI_INT, win);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RMA_RANGE, "a put before the window gave class %d", cls);
    rc = MPI_Put(&x, 1, MPI_INT, size, 0, 1, MPI_INT, win);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RANK, "a put to rank %d gave class %d", size, cls);
    CHECK_MPI(MPI_Put(&x, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, win));
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    rc = MPI_Win_lock(12345, 0, 0, win);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_LOCKTYPE, "a bad lock type gave class %d", cls);

    /* Names, groups, info. */
    char name[MPI_MAX_OBJECT_NAME];
    int len = -1;
    CHECK_MPI(MPI_Win_get_name(win, name, &len));
    CHECK(len == 0, "a new window's name has length %d", len);
    CHECK_MPI(MPI_Win_set_name(win, "halo"));
    CHECK_MPI(MPI_Win_get_name(win, name, &len));
    CHECK(len == 4 && strcmp(name, "halo") == 0, "window name '%s'", name);
    MPI_Group wg, cg;
    int cmp = -1;
    CHECK_MPI(MPI_Win_get_group(win, &wg));
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &cg));
    CHECK_MPI(MPI_Group_compare(wg, cg, &cmp));
    CHECK(cmp == MPI_IDENT, "the window's group is not MPI_COMM_WORLD's (%d)", cmp);
    MPI_Group_free(&wg);
    MPI_Group_free(&cg);
    MPI_Info info;
    CHECK_MPI(MPI_Win_get_info(win, &info));
    MPI_Info_free(&info);
    /* A user keyval: set, read back, deleted by MPI_Win_free. */
    int kv, seven = 7, *got = NULL;
    CHECK_MPI(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, delete_fn, &kv, NULL));
    CHECK_MPI(MPI_Win_set_attr(win, kv, &seven));
    CHECK_MPI(MPI_Win_get_attr(win, kv, &got, &flag_));
    CHECK(flag_ && got == &seven, "a window attribute read back as %p (flag %d)", (void *)got, flag_);
    CHECK_MPI(MPI_Win_free(&win));
    CHECK(deleted == 7, "the window attribute's delete callback ran %d", deleted);
    CHECK_MPI(MPI_Win_free_keyval(&kv));
    CHECK(win == MPI_WIN_NULL, "MPI_Win_free did not set MPI_WIN_NULL");
    free(mine);

    /* MPI_Win_allocate: the library's memory. */
    int *mem = NULL;
    CHECK_MPI(MPI_Win_allocate((N + 1) * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD,
                               &mem, &win));
    CHECK(mem != NULL, "MPI_Win_allocate gave no memory");
    check_attrs(win, mem, (N + 1) * sizeof(int), sizeof(int), MPI_WIN_FLAVOR_ALLOCATE);
    exchange(win, mem, rank, size);
    CHECK_MPI(MPI_Win_free(&win));

    /* Large transfers (past every eager limit): a put of 300 000 ints to the next rank under
     * fences, then a get of them back under a lock, and an Rput of a strided origin. */
    {
        const int big = 300000;
        int *bm, *src = malloc(big * sizeof(int)), *back = malloc(big * sizeof(int));
        int next = (rank + 1) % size, prev = (rank + size - 1) % size;
        CHECK_MPI(MPI_Win_allocate(big * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD,
                                   &bm, &win));
        for (int i = 0; i < big; i++) {
            src[i] = rank * 7 + i;
            bm[i] = -1;
        }
        CHECK_MPI(MPI_Win_fence(0, win));
        CHECK_MPI(MPI_Put(src, big, MPI_INT, next, 0, big, MPI_INT, win));
        CHECK_MPI(MPI_Win_fence(0, win));
        for (int i = 0; i < big; i++)
            CHECK(bm[i] == prev * 7 + i, "big put: [%d] = %d", i, bm[i]);
        CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, next, 0, win));
        CHECK_MPI(MPI_Get(back, big, MPI_INT, next, 0, big, MPI_INT, win));
        CHECK_MPI(MPI_Win_unlock(next, win));
        for (int i = 0; i < big; i++)
            CHECK(back[i] == src[i], "big get: [%d] = %d", i, back[i]);
        MPI_Datatype every_other;
        CHECK_MPI(MPI_Type_vector(big / 2, 1, 2, MPI_INT, &every_other));
        CHECK_MPI(MPI_Type_commit(&every_other));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        MPI_Request rq;
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, next, 0, win));
        CHECK_MPI(MPI_Rput(src, 1, every_other, next, 0, big / 2, MPI_INT, win, &rq));
        CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Win_unlock(next, win));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (int i = 0; i < big / 2; i++)
            CHECK(bm[i] == prev * 7 + 2 * i, "strided big put: [%d] = %d", i, bm[i]);
        for (int i = big / 2; i < big; i++)
            CHECK(bm[i] == prev * 7 + i, "strided big put overran: [%d] = %d", i, bm[i]);
        MPI_Type_free(&every_other);
        CHECK_MPI(MPI_Win_free(&win));
        free(src);
        free(back);
    }

    /* Several windows at once, and a communicator other than the world. */
    MPI_Comm half;
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half));
    int hr, hs;
    MPI_Comm_rank(half, &hr);
    MPI_Comm_size(half, &hs);
    MPI_Win w2[3];
    int *m2[3];
    for (int k = 0; k < 3; k++)
        CHECK_MPI(MPI_Win_allocate((N + 1) * sizeof(int), sizeof(int), MPI_INFO_NULL, half,
                                   &m2[k], &w2[k]));
    for (int k = 0; k < 3; k++)
        exchange(w2[k], m2[k], hr, hs);
    for (int k = 2; k >= 0; k--)
        CHECK_MPI(MPI_Win_free(&w2[k]));
    MPI_Comm_free(&half);
    return test_end();
}
