/*
 * coll_sm.c - the shared-memory collectives (Barrier and the small forms of Bcast, Gather,
 * Scatter, Allgather, Alltoall, Reduce, Allreduce, Reduce_scatter_block on a communicator within
 * one node: at most 1 KiB in a member's slot) where they can go wrong:
 *
 *   - Context ids reused: ITERATIONS rounds of split + dup, collectives on both, freed in
 *     alternating order, so the same cells serve communicator after communicator.
 *   - Many communicators at once (60 duplicates: with coll_sm_contexts lowered, as the test
 *     does, context ids past those served, which stay on point-to-point), each used and checked.
 *   - A broadcasting root running ahead: 200 Bcasts in a row with rotating roots and no other
 *     synchronisation, each checked at once (a root reuses its slots after 8 calls).
 *   - Sizes on both sides of the limit (256 and 257 ints), receive types unlike the root's
 *     (a contiguous type of n ints, a strided vector with holes that must stay untouched).
 *   - Allreduce in place and not, of ints and of doubles (every rank must get the same bits),
 *     mixed with a non-blocking Ibcast in flight (point-to-point) on the same communicator.
 *   - Gather and Reduce with rotating roots (members that only write run ahead of the root),
 *     Scatter, Allgather, Alltoall and Reduce_scatter_block, in a loop, each checked at once.
 *
 * usage: coll_sm [ITERATIONS]   (default 60)
 */
#include "stormtest.h"

#define HOLE (-55555)
#define MAXN 300

static int wrank, wsize;

static int val(int r, int k, int salt)
{
    return (r * 131 + k * 7 + salt * 1009) % 4001 - 2000;
}

/* Bcast of n ints from root: the root sends MPI_INT; the others receive as MPI_INT (kind 0), as
 * one contiguous type of n ints (kind 1), or as n ints strided by 2 (kind 2). */
static void bcast_check(MPI_Comm comm, int n, int root, int salt, int kind)
{
    int r, k, buf[2 * MAXN + 2];
    MPI_Comm_rank(comm, &r);
    for (k = 0; k < 2 * MAXN + 2; k++)
        buf[k] = HOLE;
    /* Open MPI 4.1 waits forever for a root sending 0 ints when a receiver takes 1 instance of
     * an empty derived type (the same, empty, signature): empty broadcasts use MPI_INT. */
    if (n == 0)
        kind = 0;
    if (r == root || kind == 0) {
        if (r == root)
            for (k = 0; k < n; k++)
                buf[k] = val(root, k, salt);
        CHECK_MPI(MPI_Bcast(buf, n, MPI_INT, root, comm));
        for (k = 0; k < n; k++)
            CHECK(buf[k] == val(root, k, salt), "bcast n=%d root=%d: element %d is %d", n, root, k,
                  buf[k]);
        CHECK(buf[n] == HOLE, "bcast n=%d wrote past the end", n);
        return;
    }
    MPI_Datatype t;
    if (kind == 1)
        CHECK_MPI(MPI_Type_contiguous(n, MPI_INT, &t));
    else
        CHECK_MPI(MPI_Type_vector(n, 1, 2, MPI_INT, &t));
    CHECK_MPI(MPI_Type_commit(&t));
    CHECK_MPI(MPI_Bcast(buf, 1, t, root, comm));
    for (k = 0; k < n; k++) {
        int at = kind == 1 ? k : 2 * k;
        CHECK(buf[at] == val(root, k, salt), "bcast kind %d n=%d root=%d: element %d is %d", kind,
              n, root, k, buf[at]);
        if (kind == 2)
            CHECK(buf[2 * k + 1] == HOLE, "bcast into a vector wrote a hole");
    }
    CHECK_MPI(MPI_Type_free(&t));
}

/* Allreduce of n ints (sum) and n doubles (sum), in place or not. */
static void allreduce_check(MPI_Comm comm, int n, int salt, int in_place)
{
    int r, p, k, q, in[MAXN], out[MAXN];
    double din[MAXN], dout[MAXN], all[2];
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &p);
    for (k = 0; k < n; k++) {
        in[k] = val(r, k, salt);
        din[k] = 0.1 * (double)val(r, k, salt + 1);
    }
    if (in_place) {
        memcpy(out, in, sizeof(int) * (size_t)n);
        memcpy(dout, din, sizeof(double) * (size_t)n);
        CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, out, n, MPI_INT, MPI_SUM, comm));
        CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, dout, n, MPI_DOUBLE, MPI_SUM, comm));
    } else {
        CHECK_MPI(MPI_Allreduce(in, out, n, MPI_INT, MPI_SUM, comm));
        CHECK_MPI(MPI_Allreduce(din, dout, n, MPI_DOUBLE, MPI_SUM, comm));
    }
    for (k = 0; k < n; k++) {
        int want = 0;
        for (q = 0; q < p; q++)
            want += val(q, k, salt);
        CHECK(out[k] == want, "allreduce n=%d: element %d is %d, want %d", n, k, out[k], want);
    }
    /* Every member got the same bits for the doubles: their min and max agree. */
    all[0] = dout[n - 1];
    all[1] = -dout[n - 1];
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, all, 2, MPI_DOUBLE, MPI_MAX, comm));
    CHECK(all[0] == -all[1], "allreduce of doubles: members disagree (%.17g vs %.17g)", all[0],
          -all[1]);
}

/* Everything once on comm. */
static void round_on(MPI_Comm comm, int salt)
{
    int p, i;
    static const int sizes[] = {0, 1, 2, 256, 257, MAXN};
    MPI_Comm_size(comm, &p);
    CHECK_MPI(MPI_Barrier(comm));
    for (i = 0; i < 6; i++)
        bcast_check(comm, sizes[i], (salt + i) % p, salt + i, (salt + i) % 3);
    CHECK_MPI(MPI_Barrier(comm));
    allreduce_check(comm, 1, salt, salt % 2);
    allreduce_check(comm, 128, salt + 1, (salt + 1) % 2); /* 1 KiB of doubles */
    allreduce_check(comm, 129, salt + 2, salt % 2);      /* point-to-point */
    CHECK_MPI(MPI_Barrier(comm));
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 60, i, k;
    MPI_Comm many[60];
    MPI_Init(&argc, &argv);
    test_begin("coll_sm");
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);

    round_on(MPI_COMM_WORLD, 1);

    /* Reuse of context ids by communicator after communicator. */
    for (i = 0; i < iters; i++) {
        MPI_Comm split, dup;
        int color = wsize >= 4 ? wrank % 2 : 0;
        CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, wsize - wrank, &split));
        CHECK_MPI(MPI_Comm_dup(split, &dup));
        round_on(split, i);
        round_on(dup, i + 3);
        if (i % 2) {
            CHECK_MPI(MPI_Comm_free(&split));
            CHECK_MPI(MPI_Comm_free(&dup));
        } else {
            CHECK_MPI(MPI_Comm_free(&dup));
            CHECK_MPI(MPI_Comm_free(&split));
        }
    }

    /* More communicators at once than context ids served. */
    for (i = 0; i < 60; i++)
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &many[i]));
    for (i = 0; i < 60; i++) {
        bcast_check(many[i], 3, i % wsize, i, 0);
        allreduce_check(many[i], 2, i, 0);
    }
    for (i = 59; i >= 0; i--)
        CHECK_MPI(MPI_Comm_free(&many[i]));

    /* A root running ahead of its readers. */
    for (i = 0; i < 200; i++)
        bcast_check(MPI_COMM_WORLD, 1 + i % 5, i % wsize, i, i % 3);

    /* Members running ahead of a root that collects: Gather and Reduce with rotating roots,
     * then Scatter, Allgather, Alltoall and Reduce_scatter_block, each checked at once. */
    for (i = 0; i < 100; i++) {
        int root = i % wsize, in[4], got[4 * 64], one, sum, q;
        for (k = 0; k < 4; k++)
            in[k] = val(wrank, k, i);
        CHECK_MPI(MPI_Gather(in, 2, MPI_INT, got, 2, MPI_INT, root, MPI_COMM_WORLD));
        if (wrank == root)
            for (q = 0; q < wsize; q++)
                for (k = 0; k < 2; k++)
                    CHECK(got[2 * q + k] == val(q, k, i), "gather: block %d element %d", q, k);
        CHECK_MPI(MPI_Reduce(in, &sum, 1, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD));
        if (wrank == root) {
            int want = 0;
            for (q = 0; q < wsize; q++)
                want += val(q, 0, i);
            CHECK(sum == want, "reduce: %d, want %d", sum, want);
        }
        for (q = 0; q < wsize; q++)
            got[q] = val(root, q, i);
        CHECK_MPI(MPI_Scatter(got, 1, MPI_INT, &one, 1, MPI_INT, root, MPI_COMM_WORLD));
        CHECK(one == val(root, wrank, i), "scatter: %d", one);
        CHECK_MPI(MPI_Allgather(in, 1, MPI_INT, got, 1, MPI_INT, MPI_COMM_WORLD));
        for (q = 0; q < wsize; q++)
            CHECK(got[q] == val(q, 0, i), "allgather: block %d", q);
        {
            int a_in[64], a_out[64];
            for (q = 0; q < wsize; q++)
                a_in[q] = val(wrank, q, i);
            CHECK_MPI(MPI_Alltoall(a_in, 1, MPI_INT, a_out, 1, MPI_INT, MPI_COMM_WORLD));
            for (q = 0; q < wsize; q++)
                CHECK(a_out[q] == val(q, wrank, i), "alltoall: block %d", q);
            CHECK_MPI(MPI_Reduce_scatter_block(a_in, &one, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
            sum = 0;
            for (q = 0; q < wsize; q++)
                sum += val(q, wrank, i);
            CHECK(one == sum, "reduce_scatter_block: %d, want %d", one, sum);
        }
    }

    /* A non-blocking broadcast (point-to-point) in flight across shared-memory ones. */
    for (i = 0; i < 20; i++) {
        int nb[8], root = i % wsize;
        MPI_Request req;
        for (k = 0; k < 8; k++)
            nb[k] = wrank == root ? val(root, k, 99 + i) : HOLE;
        CHECK_MPI(MPI_Ibcast(nb, 8, MPI_INT, root, MPI_COMM_WORLD, &req));
        bcast_check(MPI_COMM_WORLD, 4, (root + 1) % wsize, i, 1);
        allreduce_check(MPI_COMM_WORLD, 3, i, 1);
        CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        for (k = 0; k < 8; k++)
            CHECK(nb[k] == val(root, k, 99 + i), "ibcast: element %d is %d", k, nb[k]);
    }
    return test_end();
}
