/*
 * threads_coll.c - collectives on distinct communicators from different threads at once.
 *
 * Each of 4 threads per rank owns a communicator (a dup of MPI_COMM_WORLD made before the
 * threads start) and runs, `rounds` times, the sequence MPI_Barrier, MPI_Bcast (root rotating,
 * 1..300 ints, every fifth round 20000), MPI_Allreduce (MPI_SUM), MPI_Allgather, MPI_Alltoall,
 * MPI_Reduce (MPI_MAX, root rotating; other ranks' receive buffers untouched) and
 * MPI_Iallreduce + MPI_Wait, with every result checked against values computed from (thread,
 * round, rank), so data that crossed from another thread's communicator is caught.
 *
 * Every fourth round is staggered: the threads of a rank enter it one after the other, 3 ms
 * apart, in the order 0, 1, 2, 3 on even ranks and 3, 2, 1, 0 on odd ranks.  So rank 0 is
 * blocked in thread 0's collective while rank 1 is blocked in thread 3's, and each can only
 * complete once the other rank's thread gets in: a library that holds one lock while a thread
 * blocks in a collective deadlocks (the launcher's timeout ends it).  The other rounds run all
 * threads freely.  The order of collectives on one communicator is the same on every rank, as
 * MPI requires; only the interleaving across communicators differs.
 *
 * usage: threads_coll [rounds]   (default 16)
 */
#include "stormthread.h"

#define NTHREADS 4
#define BIG 20000

static int rank, size, rounds = 16;
static MPI_Comm comms[NTHREADS];

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int ticket; /* staggered rounds: the number of threads that have entered so far */

struct worker {
    int id;
    int *a, *b; /* BIG * size ints each */
};

static int val(int k, int s, int r, int i) { return ((k * 131 + s) * 1031 + r) * 7 + i; }

/* In a staggered round, wait for this thread's turn (the one before it has been in its
 * collective for 3 ms by then). */
static void take_turn(int k, int stagger)
{
    int pos = rank % 2 == 0 ? k : NTHREADS - 1 - k, want = stagger * NTHREADS + pos;
    pthread_mutex_lock(&lock);
    while (ticket < want)
        pthread_cond_wait(&changed, &lock);
    pthread_mutex_unlock(&lock);
    if (pos > 0)
        test_sleep_ms(3);
    pthread_mutex_lock(&lock);
    ticket++;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

static void one_round(struct worker *w, int s)
{
    MPI_Comm c = comms[w->id];
    int k = w->id, i, r, n, root, *a = w->a, *b = w->b;
    long lv[3], lsum[3];
    MPI_Request rq;

    if (s % 4 == 0)
        take_turn(k, s / 4);
    CHECK_MPI(MPI_Barrier(c));

    /* Bcast */
    n = s % 5 == 4 ? BIG : 1 + (s * 37 + k * 11) % 300;
    root = (s + k) % size;
    for (i = 0; i < n; i++)
        a[i] = rank == root ? val(k, s, root, i) : -1;
    CHECK_MPI(MPI_Bcast(a, n, MPI_INT, root, c));
    for (i = 0; i < n; i++)
        CHECK(a[i] == val(k, s, root, i),
              "thread %d round %d: Bcast of %d ints from %d: element %d is %d, expected %d", k, s,
              n, root, i, a[i], val(k, s, root, i));

    /* Allreduce */
    n = s % 5 == 4 ? BIG : 1 + (s * 13 + k * 5) % 200;
    for (i = 0; i < n; i++) {
        a[i] = val(k, s, rank, i);
        b[i] = -1;
    }
    CHECK_MPI(MPI_Allreduce(a, b, n, MPI_INT, MPI_SUM, c));
    for (i = 0; i < n; i++) {
        int expect = 0;
        for (r = 0; r < size; r++)
            expect += val(k, s, r, i);
        CHECK(b[i] == expect, "thread %d round %d: Allreduce of %d ints: element %d is %d, "
                              "expected %d", k, s, n, i, b[i], expect);
    }

    /* Allgather: 3 ints from each rank */
    for (i = 0; i < 3; i++)
        a[i] = val(k, s, rank, i);
    for (i = 0; i < 3 * size; i++)
        b[i] = -1;
    CHECK_MPI(MPI_Allgather(a, 3, MPI_INT, b, 3, MPI_INT, c));
    for (r = 0; r < size; r++)
        for (i = 0; i < 3; i++)
            CHECK(b[3 * r + i] == val(k, s, r, i),
                  "thread %d round %d: Allgather: block of rank %d element %d is %d, expected "
                  "%d", k, s, r, i, b[3 * r + i], val(k, s, r, i));

    /* Alltoall: 2 ints to each rank */
    for (r = 0; r < size; r++) {
        a[2 * r] = val(k, s, rank, r);
        a[2 * r + 1] = val(k, s, rank, 1000 + r);
        b[2 * r] = b[2 * r + 1] = -1;
    }
    CHECK_MPI(MPI_Alltoall(a, 2, MPI_INT, b, 2, MPI_INT, c));
    for (r = 0; r < size; r++)
        CHECK(b[2 * r] == val(k, s, r, rank) && b[2 * r + 1] == val(k, s, r, 1000 + rank),
              "thread %d round %d: Alltoall: block from rank %d is %d %d, expected %d %d", k, s,
              r, b[2 * r], b[2 * r + 1], val(k, s, r, rank), val(k, s, r, 1000 + rank));

    /* Reduce (MAX) to a rotating root */
    n = 1 + (s * 3 + k) % 50;
    root = (s + 2 * k + 1) % size;
    for (i = 0; i < n; i++) {
        a[i] = val(k, s, rank, i) * (rank % 2 ? -1 : 1);
        b[i] = -7;
    }
    CHECK_MPI(MPI_Reduce(a, b, n, MPI_INT, MPI_MAX, root, c));
    for (i = 0; i < n; i++) {
        int expect = -7;
        if (rank == root) {
            expect = val(k, s, 0, i);
            for (r = 0; r < size; r++)
                if (val(k, s, r, i) * (r % 2 ? -1 : 1) > expect)
                    expect = val(k, s, r, i) * (r % 2 ? -1 : 1);
        }
        CHECK(b[i] == expect, "thread %d round %d: Reduce(MAX) to %d: element %d is %d, "
                              "expected %d", k, s, root, i, b[i], expect);
    }

    /* Iallreduce + Wait */
    lv[0] = k;
    lv[1] = s;
    lv[2] = rank + 1;
    lsum[0] = lsum[1] = lsum[2] = -1;
    CHECK_MPI(MPI_Iallreduce(lv, lsum, 3, MPI_LONG, MPI_SUM, c, &rq));
    sched_yield();
    CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(lsum[0] == (long)k * size && lsum[1] == (long)s * size &&
              lsum[2] == (long)size * (size + 1) / 2,
          "thread %d round %d: Iallreduce gave %ld %ld %ld, expected %ld %ld %ld", k, s, lsum[0],
          lsum[1], lsum[2], (long)k * size, (long)s * size, (long)size * (size + 1) / 2);
}

static void *worker(void *arg)
{
    struct worker *w = (struct worker *)arg;
    int s;
    for (s = 0; s < rounds; s++)
        one_round(w, s);
    return NULL;
}

int main(int argc, char **argv)
{
    struct worker ws[NTHREADS];
    int k;

    test_init_multiple(&argc, &argv, "threads_coll");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1)
        rounds = atoi(argv[1]);
    CHECK(rounds > 0, "usage: threads_coll [rounds]");
    for (k = 0; k < NTHREADS; k++) {
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comms[k]));
        ws[k].id = k;
        ws[k].a = test_malloc(sizeof(int) * (size_t)(BIG + 4 * size));
        ws[k].b = test_malloc(sizeof(int) * (size_t)(BIG + 4 * size));
    }
    test_run_threads(NTHREADS, worker, ws, sizeof ws[0]);
    CHECK(ticket == ((rounds + 3) / 4) * NTHREADS,
          "%d threads entered staggered rounds, expected %d", ticket,
          ((rounds + 3) / 4) * NTHREADS);
    for (k = 0; k < NTHREADS; k++) {
        CHECK_MPI(MPI_Comm_free(&comms[k]));
        free(ws[k].a);
        free(ws[k].b);
    }
    return test_end();
}
