/*
 * threads_init.c - MPI_Init_thread(MPI_THREAD_MULTIPLE) and the calls any thread may make.
 *
 * Checked: MPI_Init_thread provides MPI_THREAD_MULTIPLE and MPI_Query_thread says the same, from
 * the main thread and from every other thread; MPI_Is_thread_main is true in the thread that
 * called MPI_Init_thread and false in the others; MPI_Initialized, MPI_Comm_rank/size and
 * MPI_Wtime work in every thread at once.  Then each of 4 threads per rank exchanges 200
 * messages around the ring on MPI_COMM_WORLD with MPI_Sendrecv, its own tag telling its traffic
 * apart from the other threads' (source, tag, count and payload checked).  This is the first
 * thing a library that claims MPI_THREAD_MULTIPLE must get right; the other threads_* programs
 * test it harder.
 *
 * usage: threads_init
 */
#include "stormthread.h"

#define NTHREADS 4
#define ROUNDS 200
#define WORDS 6

static int rank, size;

struct worker {
    int id;
};

static void *worker(void *arg)
{
    struct worker *w = (struct worker *)arg;
    int flag = -1, r = -1, s = -1, level = -1, i, j, right = (rank + 1) % size,
        left = (rank + size - 1) % size, count = -1;
    int out[WORDS], in[WORDS];
    double t0, t1;
    MPI_Status st;

    CHECK_MPI(MPI_Is_thread_main(&flag));
    CHECK(flag == 0, "thread %d: MPI_Is_thread_main says %d in a thread that did not call "
                     "MPI_Init_thread", w->id, flag);
    CHECK_MPI(MPI_Query_thread(&level));
    CHECK(level == MPI_THREAD_MULTIPLE, "thread %d: MPI_Query_thread says %s (%d)", w->id,
          test_thread_level_name(level), level);
    CHECK_MPI(MPI_Initialized(&flag));
    CHECK(flag == 1, "thread %d: MPI_Initialized says %d", w->id, flag);
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &s));
    CHECK(r == rank && s == size, "thread %d: rank/size %d/%d, the main thread saw %d/%d", w->id,
          r, s, rank, size);
    t0 = MPI_Wtime();
    t1 = MPI_Wtime();
    CHECK(t1 >= t0, "thread %d: MPI_Wtime went backwards (%g then %g)", w->id, t0, t1);

    for (i = 0; i < ROUNDS; i++) {
        out[0] = rank;
        out[1] = w->id;
        out[2] = i;
        for (j = 3; j < WORDS; j++)
            out[j] = rank * 1000003 + w->id * 10007 + i * 31 + j;
        memset(in, 0xff, sizeof in);
        CHECK_MPI(MPI_Sendrecv(out, WORDS, MPI_INT, right, w->id, in, WORDS, MPI_INT, left, w->id,
                               MPI_COMM_WORLD, &st));
        CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
        CHECK(st.MPI_SOURCE == left && st.MPI_TAG == w->id && count == WORDS,
              "thread %d round %d: status source %d tag %d count %d, expected %d/%d/%d", w->id, i,
              st.MPI_SOURCE, st.MPI_TAG, count, left, w->id, WORDS);
        CHECK(in[0] == left && in[1] == w->id && in[2] == i,
              "thread %d round %d: got the message of rank %d thread %d round %d", w->id, i,
              in[0], in[1], in[2]);
        for (j = 3; j < WORDS; j++)
            CHECK(in[j] == left * 1000003 + w->id * 10007 + i * 31 + j,
                  "thread %d round %d: word %d is %d", w->id, i, j, in[j]);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    struct worker ws[NTHREADS];
    int i, flag = -1;

    test_init_multiple(&argc, &argv, "threads_init");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK_MPI(MPI_Is_thread_main(&flag));
    CHECK(flag == 1, "MPI_Is_thread_main says %d in the thread that called MPI_Init_thread", flag);

    for (i = 0; i < NTHREADS; i++)
        ws[i].id = i;
    test_run_threads(NTHREADS, worker, ws, sizeof ws[0]);

    CHECK_MPI(MPI_Is_thread_main(&flag));
    CHECK(flag == 1, "MPI_Is_thread_main says %d in the main thread after the others ended", flag);
    return test_end();
}
