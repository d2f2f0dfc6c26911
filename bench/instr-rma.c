/*
 * instr-rma.c - the 8-byte one-sided paths whose instruction counts ci/bench-instr.sh --rma
 * measures under callgrind (noise-free: the same binary and inputs give the same counts).
 *
 *   instr-rma N   on a 64-byte MPI_Win_allocate window, rank 0 under MPI_Win_lock_all runs five
 *                 phases against rank 1, each 100 warm-up iterations then N, each in its own
 *                 function so callgrind can count it whole (--toggle-collect=phase_*):
 *                   phase_put   MPI_Put of one long, then MPI_Win_flush
 *                   phase_get   MPI_Get of one long, then MPI_Win_flush
 *                   phase_acc   MPI_Accumulate of one double (MPI_SUM), then MPI_Win_flush
 *                   phase_fop   MPI_Fetch_and_op of one long (MPI_SUM), then MPI_Win_flush
 *                   phase_cas   MPI_Compare_and_swap of one long, then MPI_Win_flush
 *                 Rank 1 waits in a barrier meanwhile. Per operation: a phase's count / (N+100),
 *                 the MPI call's own share from PMPI_<name>'s inclusive count.
 *
 * Every value is checked (the get reads back the put, the fetch-and-op and compare-and-swap
 * results follow the count, rank 1 checks its window at the end), so a broken path is an error,
 * not a cheap count.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static void die(int rank, const char *what)
{
    fprintf(stderr, "instr-rma: rank %d: %s\n", rank, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* The window's slots at rank 1 (in longs). */
enum { PUT = 0, FOP = 1, CAS = 2, ACC = 3 };

__attribute__((noinline)) long phase_put(MPI_Win win, long n)
{
    long v = 0;
    for (long i = 0; i < n; i++) {
        v = i;
        MPI_Put(&v, 1, MPI_LONG, 1, PUT, 1, MPI_LONG, win);
        MPI_Win_flush(1, win);
    }
    return v;
}

__attribute__((noinline)) long phase_get(MPI_Win win, long n)
{
    long v = -1, bad = 0;
    for (long i = 0; i < n; i++) {
        MPI_Get(&v, 1, MPI_LONG, 1, PUT, 1, MPI_LONG, win);
        MPI_Win_flush(1, win);
        bad |= v ^ (n - 1);
    }
    return bad;
}

__attribute__((noinline)) void phase_acc(MPI_Win win, long n)
{
    double one = 1.0;
    for (long i = 0; i < n; i++) {
        MPI_Accumulate(&one, 1, MPI_DOUBLE, 1, ACC, 1, MPI_DOUBLE, MPI_SUM, win);
        MPI_Win_flush(1, win);
    }
}

__attribute__((noinline)) long phase_fop(MPI_Win win, long n)
{
    long one = 1, res = -1, bad = 0;
    for (long i = 0; i < n; i++) {
        MPI_Fetch_and_op(&one, &res, MPI_LONG, 1, FOP, MPI_SUM, win);
        MPI_Win_flush(1, win);
        bad |= res ^ i;
    }
    return bad;
}

__attribute__((noinline)) long phase_cas(MPI_Win win, long n)
{
    long res = -1, bad = 0;
    for (long i = 0; i < n; i++) {
        long next = i + 1;
        MPI_Compare_and_swap(&next, &i, &res, MPI_LONG, 1, CAS, win);
        MPI_Win_flush(1, win);
        bad |= res ^ i;
    }
    return bad;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2 || size != 2) {
        if (rank == 0)
            fprintf(stderr, "usage: instr-rma N (2 ranks)\n");
        MPI_Finalize();
        return 2;
    }
    long n = atol(argv[1]) + 100;
    long *base;
    MPI_Win win;
    MPI_Win_allocate(8 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    for (int k = 0; k < 8; k++)
        base[k] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        MPI_Win_lock_all(0, win);
        if (phase_put(win, n) != n - 1)
            die(rank, "put loop");
        if (phase_get(win, n) != 0)
            die(rank, "MPI_Get did not read back the last MPI_Put");
        phase_acc(win, n);
        if (phase_fop(win, n) != 0)
            die(rank, "MPI_Fetch_and_op results do not count up");
        if (phase_cas(win, n) != 0)
            die(rank, "MPI_Compare_and_swap results do not count up");
        MPI_Win_unlock_all(win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
        double acc = *(double *)&base[ACC];
        if (base[PUT] != n - 1 || base[FOP] != n || base[CAS] != n || acc != (double)n)
            die(rank, "the window does not hold what the operations left");
        MPI_Win_unlock(1, win);
    }
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
