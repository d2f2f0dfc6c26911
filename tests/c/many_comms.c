/*
 * many_comms.c - 2000 communicators alive at once, made by MPI_Comm_dup and MPI_Comm_split, with
 * the library's default parameters; then creation/free cycles that only work if context ids are
 * reused.
 *
 * Communicator i (of N, default 2000) is, by i mod 4:
 *   0  a dup of MPI_COMM_WORLD
 *   1  a split of MPI_COMM_WORLD, color (rank + i) mod 2, key -rank (members in falling rank order)
 *   2  a dup of communicator i - 1 (a dup of a split)
 *   3  a split of communicator i - 3 (a split of a dup), color rank mod 2, key rank
 * Every rank gets one communicator per i, so N are alive at once in every process. The members of
 * each (world ranks in rank order) are computed here; size and rank are checked against them. On
 * every communicator a receive from MPI_ANY_SOURCE is posted first (all N at once, one tag), then
 * each rank sends its right neighbour (i, its world rank), in the reverse order: each receive must
 * get the message of its own communicator from its left neighbour. Then an MPI_Allreduce of
 * (world rank, world rank squared, i) on each, in order, checked against the members. All are freed
 * (odd ones first) and the handles come back as MPI_COMM_NULL. Then CYCLES rounds (default 4) make
 * N / 4 communicators the same way and free them again: 2 * N in all by default, past MPICH's 2048
 * context ids and stormpi's default comm_max_cids, so ids must be reused; each checked by size,
 * rank and, every 100th, an Allreduce.
 *
 * usage: many_comms [N] [CYCLES]
 */
#include "stormtest.h"

#define TAG 5

static int rank, size;

/* Communicator i's members (world ranks, in rank order) into m; returns how many. */
static int members_of(int i, int *m)
{
    int n = 0, r;
    switch (i % 4) {
    case 0:
        for (r = 0; r < size; r++)
            m[n++] = r;
        break;
    case 1:
    case 2: {
        int color = (rank + (i - i % 4 + 1)) % 2;
        for (r = size - 1; r >= 0; r--)
            if ((r + (i - i % 4 + 1)) % 2 == color)
                m[n++] = r;
        break;
    }
    default:
        for (r = 0; r < size; r++)
            if (r % 2 == rank % 2)
                m[n++] = r;
        break;
    }
    return n;
}

/* Makes communicator i of the set `c` (whose earlier members it may use). */
static void make(MPI_Comm *c, int i)
{
    switch (i % 4) {
    case 0:
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c[i]));
        break;
    case 1:
        CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, (rank + i) % 2, -rank, &c[i]));
        break;
    case 2:
        CHECK_MPI(MPI_Comm_dup(c[i - 1], &c[i]));
        break;
    default:
        CHECK_MPI(MPI_Comm_split(c[i - 3], rank % 2, rank, &c[i]));
        break;
    }
    CHECK(c[i] != MPI_COMM_NULL, "communicator %d is MPI_COMM_NULL", i);
}

/* Checks communicator i's size and rank against its members; returns my rank in it. */
static int check_shape(MPI_Comm c, int i, const int *m, int n)
{
    int s, r, me = -1, k;
    for (k = 0; k < n; k++)
        if (m[k] == rank)
            me = k;
    CHECK_MPI(MPI_Comm_size(c, &s));
    CHECK_MPI(MPI_Comm_rank(c, &r));
    CHECK(s == n && r == me, "communicator %d: size %d rank %d, expected size %d rank %d", i, s,
          r, n, me);
    return me;
}

static void check_allreduce(MPI_Comm c, int i, const int *m, int n)
{
    int in[3], out[3], want[3] = {0, 0, 0}, k;
    in[0] = rank;
    in[1] = rank * rank;
    in[2] = i;
    for (k = 0; k < n; k++) {
        want[0] += m[k];
        want[1] += m[k] * m[k];
        want[2] += i;
    }
    CHECK_MPI(MPI_Allreduce(in, out, 3, MPI_INT, MPI_SUM, c));
    CHECK(out[0] == want[0] && out[1] == want[1] && out[2] == want[2],
          "communicator %d: Allreduce gave (%d, %d, %d), expected (%d, %d, %d)", i, out[0],
          out[1], out[2], want[0], want[1], want[2]);
}

int main(int argc, char **argv)
{
    int n_comms = 2000, cycles = 4, i, k, cycle;
    int m[64];
    MPI_Comm *c;
    MPI_Request *req;
    int (*in)[2], (*out)[2];

    MPI_Init(&argc, &argv);
    test_begin("many_comms");
    if (argc > 1)
        n_comms = atoi(argv[1]);
    if (argc > 2)
        cycles = atoi(argv[2]);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size <= 64, "at most 64 ranks, got %d", size);

    c = test_malloc(sizeof(MPI_Comm) * (size_t)n_comms);
    req = test_malloc(sizeof(MPI_Request) * 2 * (size_t)n_comms);
    in = test_malloc(sizeof(*in) * (size_t)n_comms);
    out = test_malloc(sizeof(*out) * (size_t)n_comms);

    /* N alive at once. */
    for (i = 0; i < n_comms; i++) {
        make(c, i);
        check_shape(c[i], i, m, members_of(i, m));
    }
    for (i = 0; i < n_comms; i++)
        for (k = 0; k < i; k += 97)
            CHECK(c[i] != c[k], "communicators %d and %d have the same handle", k, i);

    /* One message on each, all receives posted first with one tag: contexts keep them apart. */
    for (i = 0; i < n_comms; i++) {
        out[i][0] = out[i][1] = -1;
        CHECK_MPI(MPI_Irecv(out[i], 2, MPI_INT, MPI_ANY_SOURCE, TAG, c[i], &req[i]));
    }
    for (i = n_comms - 1; i >= 0; i--) {
        int n = members_of(i, m), me = check_shape(c[i], i, m, n);
        in[i][0] = i;
        in[i][1] = rank;
        CHECK_MPI(MPI_Isend(in[i], 2, MPI_INT, (me + 1) % n, TAG, c[i], &req[n_comms + i]));
    }
    {
        MPI_Status *st = test_malloc(sizeof(MPI_Status) * 2 * (size_t)n_comms);
        CHECK_MPI(MPI_Waitall(2 * n_comms, req, st));
        for (i = 0; i < n_comms; i++) {
            int n = members_of(i, m), me = check_shape(c[i], i, m, n), left = (me + n - 1) % n;
            CHECK(out[i][0] == i && out[i][1] == m[left] && st[i].MPI_SOURCE == left &&
                      st[i].MPI_TAG == TAG,
                  "communicator %d: got (%d, %d) from rank %d tag %d, expected (%d, %d) from "
                  "rank %d tag %d",
                  i, out[i][0], out[i][1], st[i].MPI_SOURCE, st[i].MPI_TAG, i, m[left], left,
                  TAG);
        }
        free(st);
    }

    /* A collective on each. */
    for (i = 0; i < n_comms; i++)
        check_allreduce(c[i], i, m, members_of(i, m));

    /* Freed in another order than made (a communicator may go before those made from it). */
    for (i = 1; i < n_comms; i += 2) {
        CHECK_MPI(MPI_Comm_free(&c[i]));
        CHECK(c[i] == MPI_COMM_NULL, "communicator %d: handle not MPI_COMM_NULL after free", i);
    }
    for (i = (n_comms - 1) / 2 * 2; i >= 0; i -= 2) {
        CHECK_MPI(MPI_Comm_free(&c[i]));
        CHECK(c[i] == MPI_COMM_NULL, "communicator %d: handle not MPI_COMM_NULL after free", i);
    }

    /* Cycles: N / 4 made and freed again, CYCLES times; ids must come back. */
    for (cycle = 0; cycle < cycles; cycle++) {
        for (i = 0; i < n_comms / 4; i++) {
            int n = members_of(i, m);
            make(c, i);
            check_shape(c[i], i, m, n);
            if (i % 100 == 99)
                check_allreduce(c[i], i, m, n);
        }
        for (i = n_comms / 4 - 1; i >= 0; i--)
            CHECK_MPI(MPI_Comm_free(&c[i]));
    }

    free(c);
    free(req);
    free(in);
    free(out);
    return test_end();
}
