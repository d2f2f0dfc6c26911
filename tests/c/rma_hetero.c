/* One-sided communication across byte orders (tests/tests/hetero.rs runs it with x86_64 and
 * s390x ranks in one job; every check is by value, so a missed conversion shows as a wrong
 * number). Every rank, on every target including the big-endian one:
 *  - puts N ints (contiguous) and N doubles (into every other double of the target: a vector
 *    target type), then a large block of ints (more than the 8 KiB at which a put's data
 *    travels apart), and gets back values the target wrote itself;
 *  - accumulates MPI_SUM of N ints and N doubles (under fence, then again under a shared lock);
 *  - MPI_Fetch_and_op(MPI_SUM) of 1 on a long long counter, and MPI_Compare_and_swap of a
 *    long long whose bytes all differ, from 0 to its own value: exactly one rank wins.
 * Every value depends only on ranks and indices. */
#include <mpi.h>
#include "stormtest.h"
#include <stddef.h>
#include <string.h>

#define N 16
#define BIG 4096
#define MAXP 8

struct win {
    int own_i[N];           /* written by the target itself, read by gets */
    double own_d[N];
    int put_i[MAXP][N];     /* slot of each origin */
    double put_d[MAXP][2 * N];
    int acc_i[N];
    double acc_d[N];
    long long counter;
    long long cas;
    int big[BIG];           /* the large put, from rank (target + 1) % size */
};

#define OFF(f) ((MPI_Aint)offsetof(struct win, f))

static int ival(int r, int k) { return 0x01020304 + r * 65536 + k; }
static double dval(int r, int k) { return r * 1000.0 + k / 8.0 + 0.5; }
static long long casval(int r) { return 0x0102030405060708LL + r; }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("rma_hetero");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size <= MAXP, "at most %d ranks", MAXP);

    struct win *w;
    MPI_Win win;
    CHECK_MPI(MPI_Win_allocate(sizeof *w, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w, &win));
    memset(w, 0, sizeof *w);
    for (int k = 0; k < N; k++) {
        w->own_i[k] = ival(100 + rank, k);
        w->own_d[k] = dval(100 + rank, k);
    }
    MPI_Datatype every_other;
    CHECK_MPI(MPI_Type_vector(N, 1, 2, MPI_DOUBLE, &every_other));
    CHECK_MPI(MPI_Type_commit(&every_other));

    int pi[N], big[BIG], gi[MAXP][N];
    double pd[N], gd[MAXP][N];
    for (int k = 0; k < N; k++) {
        pi[k] = ival(rank, k);
        pd[k] = dval(rank, k);
    }
    for (int k = 0; k < BIG; k++)
        big[k] = ival(rank, k);

    /* Active target: puts, gets, accumulates. */
    CHECK_MPI(MPI_Win_fence(0, win));
    for (int t = 0; t < size; t++) {
        CHECK_MPI(MPI_Put(pi, N, MPI_INT, t, OFF(put_i) + rank * N * (MPI_Aint)sizeof(int), N,
                          MPI_INT, win));
        CHECK_MPI(MPI_Put(pd, N, MPI_DOUBLE, t,
                          OFF(put_d) + rank * 2 * N * (MPI_Aint)sizeof(double), 1, every_other, win));
        CHECK_MPI(MPI_Get(gi[t], N, MPI_INT, t, OFF(own_i), N, MPI_INT, win));
        CHECK_MPI(MPI_Get(gd[t], N, MPI_DOUBLE, t, OFF(own_d), N, MPI_DOUBLE, win));
        CHECK_MPI(MPI_Accumulate(pi, N, MPI_INT, t, OFF(acc_i), N, MPI_INT, MPI_SUM, win));
        CHECK_MPI(MPI_Accumulate(pd, N, MPI_DOUBLE, t, OFF(acc_d), N, MPI_DOUBLE, MPI_SUM, win));
    }
    int bt = (rank + size - 1) % size;
    CHECK_MPI(MPI_Put(big, BIG, MPI_INT, bt, OFF(big), BIG, MPI_INT, win));
    CHECK_MPI(MPI_Win_fence(0, win));

    for (int t = 0; t < size; t++)
        for (int k = 0; k < N; k++) {
            CHECK(gi[t][k] == ival(100 + t, k), "get int %d from %d: %#x, want %#x", k, t,
                  gi[t][k], ival(100 + t, k));
            CHECK(gd[t][k] == dval(100 + t, k), "get double %d from %d: %g, want %g", k, t,
                  gd[t][k], dval(100 + t, k));
        }
    for (int o = 0; o < size; o++)
        for (int k = 0; k < N; k++) {
            CHECK(w->put_i[o][k] == ival(o, k), "put int %d from %d: %#x, want %#x", k, o,
                  w->put_i[o][k], ival(o, k));
            CHECK(w->put_d[o][2 * k] == dval(o, k) && w->put_d[o][2 * k + 1] == 0.0,
                  "put double %d from %d: %g", k, o, w->put_d[o][2 * k]);
        }
    int from = (rank + 1) % size;
    for (int k = 0; k < BIG; k++)
        CHECK(w->big[k] == ival(from, k), "large put int %d from %d: %#x, want %#x", k, from,
              w->big[k], ival(from, k));
    int want_i[N];
    double want_d[N];
    for (int k = 0; k < N; k++) {
        want_i[k] = 0;
        want_d[k] = 0.0;
        for (int o = 0; o < size; o++) {
            want_i[k] += ival(o, k);
            want_d[k] += dval(o, k);
        }
        CHECK(w->acc_i[k] == want_i[k], "accumulated int %d: %#x, want %#x", k, w->acc_i[k],
              want_i[k]);
        CHECK(w->acc_d[k] == want_d[k], "accumulated double %d: %g, want %g", k, w->acc_d[k],
              want_d[k]);
    }
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));

    /* Passive target: accumulates again, fetch-and-op, compare-and-swap. */
    long long fetched[MAXP] = {0}, old[MAXP] = {0};
    for (int t = 0; t < size; t++) {
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win));
        CHECK_MPI(MPI_Accumulate(pi, N, MPI_INT, t, OFF(acc_i), N, MPI_INT, MPI_SUM, win));
        CHECK_MPI(MPI_Accumulate(pd, N, MPI_DOUBLE, t, OFF(acc_d), N, MPI_DOUBLE, MPI_SUM, win));
        long long one = 1, mine = casval(rank), zero = 0;
        CHECK_MPI(MPI_Fetch_and_op(&one, &fetched[t], MPI_LONG_LONG, t, OFF(counter), MPI_SUM, win));
        CHECK_MPI(MPI_Compare_and_swap(&mine, &zero, &old[t], MPI_LONG_LONG, t, OFF(cas), win));
        CHECK_MPI(MPI_Win_unlock(t, win));
        CHECK(fetched[t] >= 0 && fetched[t] < size, "fetch-and-op at %d fetched %lld", t,
              fetched[t]);
        CHECK(old[t] == 0 || (old[t] >= casval(0) && old[t] < casval(size)),
              "compare-and-swap at %d found %#llx", t, old[t]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
    CHECK_MPI(MPI_Win_sync(win));
    for (int k = 0; k < N; k++) {
        CHECK(w->acc_i[k] == 2 * want_i[k], "accumulated int %d under locks: %#x, want %#x", k,
              w->acc_i[k], 2 * want_i[k]);
        CHECK(w->acc_d[k] == 2 * want_d[k], "accumulated double %d under locks: %g, want %g", k,
              w->acc_d[k], 2 * want_d[k]);
    }
    CHECK(w->counter == size, "counter %lld, want %d", w->counter, size);
    CHECK(w->cas >= casval(0) && w->cas < casval(size), "swapped word %#llx", w->cas);
    CHECK_MPI(MPI_Win_unlock(rank, win));

    /* Every fetch saw a distinct count, and exactly one swap won, at every target. */
    long long all_f[MAXP * MAXP], all_o[MAXP * MAXP];
    MPI_Allgather(fetched, MAXP, MPI_LONG_LONG, all_f, MAXP, MPI_LONG_LONG, MPI_COMM_WORLD);
    MPI_Allgather(old, MAXP, MPI_LONG_LONG, all_o, MAXP, MPI_LONG_LONG, MPI_COMM_WORLD);
    for (int t = 0; t < size; t++) {
        int seen = 0, winners = 0, winner = -1;
        for (int o = 0; o < size; o++) {
            seen |= 1 << all_f[o * MAXP + t];
            if (all_o[o * MAXP + t] == 0) {
                winners++;
                winner = o;
            }
        }
        CHECK(seen == (1 << size) - 1, "fetch-and-op at %d fetched repeated counts", t);
        CHECK(winners == 1, "%d compare-and-swaps won at %d", winners, t);
        if (t == rank)
            CHECK(w->cas == casval(winner), "swapped word %#llx, want rank %d's", w->cas, winner);
    }

    MPI_Type_free(&every_other);
    CHECK_MPI(MPI_Win_free(&win));
    return test_end();
}
