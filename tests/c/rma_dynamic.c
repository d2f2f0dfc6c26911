/*
 * rma_dynamic.c - dynamic windows: memory attached and detached while the window lives.
 *
 * Each rank attaches two buffers, publishes their addresses (MPI_Get_address, allgathered), and
 * every rank puts into and gets from its neighbour's buffers by address under lock_all; then one
 * buffer is detached and another attached in its place. MPI_Win_attach on a window that is not
 * dynamic is MPI_ERR_RMA_FLAVOR; detaching an address never attached is MPI_ERR_RMA_ATTACH.
 */
#include "stormtest.h"

#define N 32

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    test_begin("rma_dynamic");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    MPI_Win win;
    CHECK_MPI(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    void *v;
    int flag;
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &v, &flag));
    CHECK(flag && *(int *)v == MPI_WIN_FLAVOR_DYNAMIC, "flavor %d", *(int *)v);

    int *a = malloc(N * sizeof(int)), *b = malloc(N * sizeof(int));
    for (int i = 0; i < N; i++)
        a[i] = b[i] = -1;
    CHECK_MPI(MPI_Win_attach(win, a, N * sizeof(int)));
    CHECK_MPI(MPI_Win_attach(win, b, N * sizeof(int)));
    MPI_Aint mine[2], *all = malloc(2 * size * sizeof(MPI_Aint));
    MPI_Get_address(a, &mine[0]);
    MPI_Get_address(b, &mine[1]);
    CHECK_MPI(MPI_Allgather(mine, 2, MPI_AINT, all, 2, MPI_AINT, MPI_COMM_WORLD));

    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int vals[N];
    for (int i = 0; i < N; i++)
        vals[i] = rank * 100 + i;
    CHECK_MPI(MPI_Win_lock_all(0, win));
    CHECK_MPI(MPI_Put(vals, N, MPI_INT, next, all[2 * next], N, MPI_INT, win));
    CHECK_MPI(MPI_Put(vals, 4, MPI_INT, next, all[2 * next + 1] + 8 * sizeof(int), 4, MPI_INT, win));
    CHECK_MPI(MPI_Win_flush_all(win));
    CHECK_MPI(MPI_Win_unlock_all(win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (int i = 0; i < N; i++)
        CHECK(a[i] == prev * 100 + i, "a[%d] = %d", i, a[i]);
    for (int i = 0; i < 4; i++)
        CHECK(b[8 + i] == prev * 100 + i, "b[%d] = %d", 8 + i, b[8 + i]);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    int got[N];
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, prev, 0, win));
    CHECK_MPI(MPI_Get(got, N, MPI_INT, prev, all[2 * prev], N, MPI_INT, win));
    CHECK_MPI(MPI_Win_unlock(prev, win));
    int pp = (prev + size - 1) % size;
    for (int i = 0; i < N; i++)
        CHECK(got[i] == pp * 100 + i, "got[%d] = %d from rank %d", i, got[i], prev);

    /* Detach a, attach c in its place. */
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_detach(win, a));
    int *c = calloc(N, sizeof(int));
    CHECK_MPI(MPI_Win_attach(win, c, N * sizeof(int)));
    MPI_Get_address(c, &mine[0]);
    CHECK_MPI(MPI_Allgather(mine, 2, MPI_AINT, all, 2, MPI_AINT, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, next, 0, win));
    int one = 1;
    CHECK_MPI(MPI_Accumulate(&one, 1, MPI_INT, next, all[2 * next] + sizeof(int), 1, MPI_INT,
                             MPI_SUM, win));
    CHECK_MPI(MPI_Win_unlock(next, win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(c[1] == 1, "c[1] = %d", c[1]);

    CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    int cls = 0;
    MPI_Error_class(MPI_Win_detach(win, a), &cls);
    CHECK(cls == MPI_ERR_RMA_ATTACH, "detaching what is not attached gave class %d", cls);
    CHECK_MPI(MPI_Win_detach(win, b));
    CHECK_MPI(MPI_Win_detach(win, c));
    CHECK_MPI(MPI_Win_free(&win));

    int x[4];
    CHECK_MPI(MPI_Win_create(x, sizeof x, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    MPI_Error_class(MPI_Win_attach(win, a, 4), &cls);
    CHECK(cls == MPI_ERR_RMA_FLAVOR, "attaching to a created window gave class %d", cls);
    CHECK_MPI(MPI_Win_free(&win));
    free(a);
    free(b);
    free(c);
    free(all);
    return test_end();
}
