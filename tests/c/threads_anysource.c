/*
 * threads_anysource.c - a thread blocked in MPI_Recv(MPI_ANY_SOURCE) must not stop the others.
 *
 * Per rank: a collector thread, three worker threads and the main thread.  In each of PHASES
 * phases:
 *   1. the collector says it is ready and blocks in a wildcard receive (MPI_ANY_SOURCE, tag
 *      TAG_COLLECT, MPI_COMM_WORLD): MPI_Recv in even phases, MPI_Irecv + MPI_Wait in odd ones;
 *   2. the main thread waits for that (and 5 ms more, so that the collector is inside the call),
 *      then lets the workers run `rounds` rounds each, all at once:
 *        W1  MPI_Sendrecv around the ring on MPI_COMM_WORLD, tag 1 (same communicator as the
 *            wildcard receive, other tag, specific source);
 *        W2  MPI_Irecv(MPI_ANY_SOURCE, MPI_ANY_TAG) on a communicator of its own + MPI_Send to
 *            the right + MPI_Wait (wildcards on another communicator);
 *        W3  64 KiB + 1 messages both ways around the ring on MPI_COMM_WORLD, tag 2, with
 *            MPI_Isend/MPI_Irecv/MPI_Waitall (rendezvous while the wildcard receive is posted);
 *   3. when the workers are done, the main thread enters MPI_Barrier on a communicator of its
 *      own (so every rank's workers are done), and only then sends one message to every rank's
 *      collector (itself included), which receives `size` messages and then starts the next
 *      phase.
 * Checked: every worker message (source, tag, count, contents); the collector gets exactly one
 * message from every rank per phase, with tag TAG_COLLECT, of this phase (none was taken from a
 * worker, none is early or repeated).  A library that holds a lock while a thread blocks, or
 * whose wildcard receive swallows other tags' or communicators' messages, hangs or fails here.
 *
 * usage: threads_anysource [rounds]   (default 25 per worker per phase)
 */
#include "stormthread.h"

#define PHASES 4
#define NWORKERS 3
#define TAG_COLLECT 77
#define MAGIC 0x5eed
#define W3_BYTES (64 * 1024 + 1)

static int rank, size, left, right, rounds = 25;
static MPI_Comm w2_comm, main_comm;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int collector_phase = -1; /* the phase the collector is about to receive */
static pthread_barrier_t work_start, work_done; /* main thread + workers */

static void *collector(void *arg)
{
    int p, j, msg[8], count = -1, seen[64], s;
    MPI_Status st;
    MPI_Request rq;
    (void)arg;
    for (p = 0; p < PHASES; p++) {
        for (s = 0; s < size && s < 64; s++)
            seen[s] = 0;
        pthread_mutex_lock(&lock);
        collector_phase = p;
        pthread_cond_broadcast(&changed);
        pthread_mutex_unlock(&lock);
        for (j = 0; j < size; j++) {
            memset(msg, 0, sizeof msg);
            if (p % 2 == 0) {
                CHECK_MPI(MPI_Recv(msg, 8, MPI_INT, MPI_ANY_SOURCE, TAG_COLLECT, MPI_COMM_WORLD,
                                   &st));
            } else {
                CHECK_MPI(MPI_Irecv(msg, 8, MPI_INT, MPI_ANY_SOURCE, TAG_COLLECT, MPI_COMM_WORLD,
                                    &rq));
                CHECK_MPI(MPI_Wait(&rq, &st));
            }
            CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
            s = st.MPI_SOURCE;
            CHECK(st.MPI_TAG == TAG_COLLECT && s >= 0 && s < size && count == 4,
                  "collector phase %d: got source %d tag %d count %d (expected tag %d, 4 ints)",
                  p, s, st.MPI_TAG, count, TAG_COLLECT);
            CHECK(msg[0] == MAGIC && msg[1] == s && msg[3] == s * 1000 + p,
                  "collector phase %d: message from %d holds %d %d %d %d, not a collector "
                  "message of rank %d",
                  p, s, msg[0], msg[1], msg[2], msg[3], s);
            CHECK(msg[2] == p, "collector phase %d: rank %d's message of phase %d arrived", p, s,
                  msg[2]);
            if (s < 64) {
                CHECK(!seen[s], "collector phase %d: a second message from rank %d", p, s);
                seen[s] = 1;
            }
        }
    }
    pthread_mutex_lock(&lock);
    collector_phase = PHASES;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void w1_round(int p, int i)
{
    int out[5], in[5], count = -1, n = 1 + (i % 5), j;
    MPI_Status st;
    for (j = 0; j < n; j++)
        out[j] = rank * 100000 + p * 1000 + i * 10 + j;
    memset(in, 0, sizeof in);
    CHECK_MPI(MPI_Sendrecv(out, n, MPI_INT, right, 1, in, 5, MPI_INT, left, 1, MPI_COMM_WORLD,
                           &st));
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 1 && count == n,
          "W1 phase %d round %d: source %d tag %d count %d, expected %d/1/%d", p, i,
          st.MPI_SOURCE, st.MPI_TAG, count, left, n);
    for (j = 0; j < n; j++)
        CHECK(in[j] == left * 100000 + p * 1000 + i * 10 + j,
              "W1 phase %d round %d: word %d is %d", p, i, j, in[j]);
}

static void w2_round(int p, int i)
{
    int out[3], in[3] = {0, 0, 0}, tag = 3 + i % 5, count = -1;
    MPI_Request rq;
    MPI_Status st;
    out[0] = rank;
    out[1] = p;
    out[2] = i;
    CHECK_MPI(MPI_Irecv(in, 3, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, w2_comm, &rq));
    CHECK_MPI(MPI_Send(out, 3, MPI_INT, right, tag, w2_comm));
    CHECK_MPI(MPI_Wait(&rq, &st));
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == tag && count == 3,
          "W2 phase %d round %d: source %d tag %d count %d, expected %d/%d/3", p, i,
          st.MPI_SOURCE, st.MPI_TAG, count, left, tag);
    CHECK(in[0] == left && in[1] == p && in[2] == i,
          "W2 phase %d round %d: got %d %d %d (rank, phase, round)", p, i, in[0], in[1], in[2]);
}

static unsigned char *w3_out[2], *w3_in[2];

static void w3_round(int p, int i)
{
    MPI_Request rq[4];
    MPI_Status st[4];
    int d, count = -1;
    long bad;
    /* direction 0: to the right (received from the left), 1: to the left */
    for (d = 0; d < 2; d++)
        pattern_fill(w3_out[d], W3_BYTES,
                     test_key(rank, d ? left : right, W3_BYTES, p * 10000 + i * 2 + d));
    CHECK_MPI(MPI_Irecv(w3_in[0], W3_BYTES, MPI_BYTE, left, 2, MPI_COMM_WORLD, &rq[0]));
    CHECK_MPI(MPI_Irecv(w3_in[1], W3_BYTES, MPI_BYTE, right, 2, MPI_COMM_WORLD, &rq[1]));
    CHECK_MPI(MPI_Isend(w3_out[0], W3_BYTES, MPI_BYTE, right, 2, MPI_COMM_WORLD, &rq[2]));
    CHECK_MPI(MPI_Isend(w3_out[1], W3_BYTES, MPI_BYTE, left, 2, MPI_COMM_WORLD, &rq[3]));
    CHECK_MPI(MPI_Waitall(4, rq, st));
    for (d = 0; d < 2; d++) {
        int src = d ? right : left;
        uint64_t key = test_key(src, rank, W3_BYTES, p * 10000 + i * 2 + d);
        CHECK_MPI(MPI_Get_count(&st[d], MPI_BYTE, &count));
        CHECK(st[d].MPI_SOURCE == src && st[d].MPI_TAG == 2 && count == W3_BYTES,
              "W3 phase %d round %d dir %d: source %d tag %d count %d", p, i, d,
              st[d].MPI_SOURCE, st[d].MPI_TAG, count);
        bad = pattern_check(w3_in[d], W3_BYTES, key);
        CHECK(bad < 0, "W3 phase %d round %d dir %d: byte %ld is 0x%02x, expected 0x%02x", p, i,
              d, bad, w3_in[d][bad], pattern_byte(key, (size_t)bad));
    }
}

static void *worker(void *arg)
{
    int id = *(int *)arg, p, i;
    for (p = 0; p < PHASES; p++) {
        pthread_barrier_wait(&work_start);
        for (i = 0; i < rounds; i++) {
            if (id == 0)
                w1_round(p, i);
            else if (id == 1)
                w2_round(p, i);
            else
                w3_round(p, i);
        }
        pthread_barrier_wait(&work_done);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t coll, workers[NWORKERS];
    int ids[NWORKERS], i, p, d;

    test_init_multiple(&argc, &argv, "threads_anysource");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1)
        rounds = atoi(argv[1]);
    CHECK(rounds > 0, "usage: threads_anysource [rounds]");
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &w2_comm));
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &main_comm));
    for (d = 0; d < 2; d++) {
        w3_out[d] = test_malloc(W3_BYTES);
        w3_in[d] = test_malloc(W3_BYTES);
    }
    CHECK(pthread_barrier_init(&work_start, NULL, NWORKERS + 1) == 0, "pthread_barrier_init");
    CHECK(pthread_barrier_init(&work_done, NULL, NWORKERS + 1) == 0, "pthread_barrier_init");

    CHECK(pthread_create(&coll, NULL, collector, NULL) == 0, "pthread_create");
    for (i = 0; i < NWORKERS; i++) {
        ids[i] = i;
        CHECK(pthread_create(&workers[i], NULL, worker, &ids[i]) == 0, "pthread_create");
    }

    for (p = 0; p < PHASES; p++) {
        int msg[4];
        pthread_mutex_lock(&lock);
        while (collector_phase < p)
            pthread_cond_wait(&changed, &lock);
        pthread_mutex_unlock(&lock);
        test_sleep_ms(5); /* the collector is in its wildcard receive by now */
        pthread_barrier_wait(&work_start);
        pthread_barrier_wait(&work_done);
        CHECK_MPI(MPI_Barrier(main_comm)); /* every rank's workers are done with this phase */
        msg[0] = MAGIC;
        msg[1] = rank;
        msg[2] = p;
        msg[3] = rank * 1000 + p;
        for (i = 0; i < size; i++) /* rotated, so the collectors hear from different ranks first */
            CHECK_MPI(MPI_Send(msg, 4, MPI_INT, (rank + i) % size, TAG_COLLECT, MPI_COMM_WORLD));
    }
    CHECK(pthread_join(coll, NULL) == 0, "pthread_join");
    for (i = 0; i < NWORKERS; i++)
        CHECK(pthread_join(workers[i], NULL) == 0, "pthread_join");
    CHECK(collector_phase == PHASES, "collector ended at phase %d", collector_phase);

    pthread_barrier_destroy(&work_start);
    pthread_barrier_destroy(&work_done);
    for (d = 0; d < 2; d++) {
        free(w3_out[d]);
        free(w3_in[d]);
    }
    CHECK_MPI(MPI_Comm_free(&w2_comm));
    CHECK_MPI(MPI_Comm_free(&main_comm));
    return test_end();
}
