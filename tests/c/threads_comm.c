/*
 * threads_comm.c - MPI_Comm_dup, MPI_Comm_split and MPI_Comm_free from several threads at once.
 *
 * MPI requires the collective calls on one communicator to be made in the same order on every
 * rank, so each of 4 threads per rank works on a parent communicator of its own (a dup of
 * MPI_COMM_WORLD made by the main thread before the threads start); creating communicators from
 * different parents at the same time, in whatever interleaving the threads happen to run, is
 * allowed and is what is tested.  Each thread, `rounds` times:
 *   - dups its parent (same size and rank, MPI_CONGRUENT to it), splits the parent (two colors
 *     by rank parity; every third round one rank gives MPI_UNDEFINED and must get
 *     MPI_COMM_NULL; keys reversing the order in even rounds), splits the dup (by thread and
 *     round) and dups that split;
 *   - uses them: MPI_Allreduce on each, with values from (thread, round, rank) checked against
 *     the members the split should have; ranks in each split as the keys order them; a message
 *     around the ring of the dup received with MPI_ANY_SOURCE/MPI_ANY_TAG, whose payload names
 *     the thread and round: if two threads' new communicators were the same, a thread would get
 *     another thread's message;
 *   - frees them in an order different from the creation order (handles become MPI_COMM_NULL).
 * At the end every thread makes 8 dups of its parent at once, uses and frees them newest first;
 * then the main thread checks that world still works (a dup and an MPI_Allreduce).
 *
 * usage: threads_comm [rounds]   (default 8)
 */
#include "stormthread.h"

#define NTHREADS 4
#define NBURST 8

static int rank, size, rounds = 8;
static MPI_Comm parents[NTHREADS];

struct worker {
    int id;
};

/* Members of a split of a size-`size` communicator: color of rank r, its key. */
static int split_color(int r, int k, int round)
{
    if (round % 3 == 2 && size > 1 && r == (round + k) % size)
        return MPI_UNDEFINED;
    return r % 2;
}

static int split_key(int r, int round) { return round % 2 == 0 ? size - r : r; }

static void check_split(MPI_Comm s, int k, int round)
{
    int color = split_color(rank, k, round), n = 0, pos = 0, r, ssize = -1, srank = -1;
    long sum = -1, expect = 0, mine = 1000L * k + round * 10 + rank + 1;
    if (color == MPI_UNDEFINED) {
        CHECK(s == MPI_COMM_NULL,
              "thread %d round %d: MPI_Comm_split with MPI_UNDEFINED gave a communicator", k,
              round);
        return;
    }
    CHECK(s != MPI_COMM_NULL, "thread %d round %d: MPI_Comm_split gave MPI_COMM_NULL", k, round);
    for (r = 0; r < size; r++) {
        if (split_color(r, k, round) != color)
            continue;
        n++;
        expect += 1000L * k + round * 10 + r + 1;
        /* keys are distinct, so the rank in the split is the number of members with a smaller
         * key */
        if (split_key(r, round) < split_key(rank, round))
            pos++;
    }
    CHECK_MPI(MPI_Comm_size(s, &ssize));
    CHECK_MPI(MPI_Comm_rank(s, &srank));
    CHECK(ssize == n && srank == pos,
          "thread %d round %d: split (color %d) has size %d, my rank %d; expected %d and %d", k,
          round, color, ssize, srank, n, pos);
    CHECK_MPI(MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, s));
    CHECK(sum == expect, "thread %d round %d: Allreduce on the split gave %ld, expected %ld", k,
          round, sum, expect);
}

/* A message around the ring of c, received with wildcards: it must be this thread's. */
static void ring_check(MPI_Comm c, int k, int round, const char *what)
{
    int csize, crank, out[3], in[3] = {-1, -1, -1}, count = -1;
    MPI_Request rq;
    MPI_Status st;
    CHECK_MPI(MPI_Comm_size(c, &csize));
    CHECK_MPI(MPI_Comm_rank(c, &crank));
    out[0] = k;
    out[1] = round;
    out[2] = crank;
    CHECK_MPI(MPI_Irecv(in, 3, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, c, &rq));
    CHECK_MPI(MPI_Send(out, 3, MPI_INT, (crank + 1) % csize, 5, c));
    CHECK_MPI(MPI_Wait(&rq, &st));
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(in[0] == k && in[1] == round,
          "thread %d round %d: on its %s got a message of thread %d round %d (communicators of "
          "different threads are not distinct)",
          k, round, what, in[0], in[1]);
    CHECK(count == 3 && st.MPI_TAG == 5 && st.MPI_SOURCE == (crank + csize - 1) % csize &&
              in[2] == st.MPI_SOURCE,
          "thread %d round %d on its %s: count %d tag %d source %d (payload says %d)", k, round,
          what, count, st.MPI_TAG, st.MPI_SOURCE, in[2]);
}

static void *worker(void *arg)
{
    struct worker *w = (struct worker *)arg;
    int k = w->id, round, i, cmp = -1, r = -1, s = -1;
    MPI_Comm parent = parents[k];

    for (round = 0; round < rounds; round++) {
        MPI_Comm d, sp, ds, dds = MPI_COMM_NULL;
        long v, sum = -1;
        CHECK_MPI(MPI_Comm_dup(parent, &d));
        CHECK_MPI(MPI_Comm_rank(d, &r));
        CHECK_MPI(MPI_Comm_size(d, &s));
        CHECK(r == rank && s == size, "thread %d round %d: dup has rank %d size %d", k, round, r,
              s);
        CHECK_MPI(MPI_Comm_compare(d, parent, &cmp));
        CHECK(cmp == MPI_CONGRUENT, "thread %d round %d: compare(dup, parent) = %d", k, round,
              cmp);
        CHECK_MPI(MPI_Comm_split(parent, split_color(rank, k, round), split_key(rank, round), &sp));
        /* split of the dup: one group per (thread, round) parity, ranks in reverse */
        CHECK_MPI(MPI_Comm_split(d, (rank + k + round) % 2, -rank, &ds));
        CHECK_MPI(MPI_Comm_dup(ds, &dds));

        v = 100000L * k + round * 100 + rank;
        CHECK_MPI(MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, d));
        CHECK(sum == 100000L * k * size + (long)round * 100 * size + (long)size * (size - 1) / 2,
              "thread %d round %d: Allreduce on the dup gave %ld", k, round, sum);
        check_split(sp, k, round);
        {
            int n = 0, pos = 0, x, dsize = -1, drank = -1;
            for (x = 0; x < size; x++)
                if ((x + k + round) % 2 == (rank + k + round) % 2) {
                    n++;
                    if (x > rank)
                        pos++;
                }
            CHECK_MPI(MPI_Comm_size(dds, &dsize));
            CHECK_MPI(MPI_Comm_rank(dds, &drank));
            CHECK(dsize == n && drank == pos,
                  "thread %d round %d: dup of the split of the dup has size %d rank %d, "
                  "expected %d and %d",
                  k, round, dsize, drank, n, pos);
        }
        ring_check(d, k, round, "dup");
        ring_check(dds, k, round, "dup of a split");

        /* free in an order unlike the creation order */
        if (round % 2) {
            CHECK_MPI(MPI_Comm_free(&d));
            CHECK_MPI(MPI_Comm_free(&dds));
            CHECK_MPI(MPI_Comm_free(&ds));
        } else {
            CHECK_MPI(MPI_Comm_free(&ds));
            CHECK_MPI(MPI_Comm_free(&d));
            CHECK_MPI(MPI_Comm_free(&dds));
        }
        if (sp != MPI_COMM_NULL)
            CHECK_MPI(MPI_Comm_free(&sp));
        CHECK(d == MPI_COMM_NULL && ds == MPI_COMM_NULL && dds == MPI_COMM_NULL &&
                  sp == MPI_COMM_NULL,
              "thread %d round %d: MPI_Comm_free left a handle set", k, round);
    }

    /* a burst: many communicators alive at once in every thread */
    {
        MPI_Comm burst[NBURST];
        for (i = 0; i < NBURST; i++)
            CHECK_MPI(MPI_Comm_dup(i == 0 ? parent : burst[i - 1], &burst[i]));
        for (i = NBURST - 1; i >= 0; i--) {
            ring_check(burst[i], k, rounds + i, "burst dup");
            CHECK_MPI(MPI_Comm_free(&burst[i]));
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    struct worker ws[NTHREADS];
    int k, one = 1, n = 0;
    MPI_Comm c;

    test_init_multiple(&argc, &argv, "threads_comm");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1)
        rounds = atoi(argv[1]);
    CHECK(rounds > 0, "usage: threads_comm [rounds]");
    for (k = 0; k < NTHREADS; k++) {
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &parents[k]));
        ws[k].id = k;
    }
    test_run_threads(NTHREADS, worker, ws, sizeof ws[0]);
    for (k = 0; k < NTHREADS; k++)
        CHECK_MPI(MPI_Comm_free(&parents[k]));

    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    CHECK_MPI(MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, c));
    CHECK(n == size, "Allreduce on a dup after the threads ended gave %d", n);
    CHECK_MPI(MPI_Comm_free(&c));
    return test_end();
}
