/*
 * threads_waittest.c - MPI_Wait in one thread while another thread tests its own requests, and
 * requests completed by progress that another thread made.
 *
 * Ranks are paired (0-1, 2-3, ...; with an odd number the last rank is its own partner).
 *   1. Thread W posts an MPI_Irecv (100 KiB, rendezvous) and blocks in MPI_Wait on it.  Thread
 *      X then runs `rounds` rounds with the partner's X: 8 MPI_Irecv and 8 MPI_Isend (0 B ..
 *      64 KiB + 1) on another communicator, completed only by MPI_Test on each request, by
 *      MPI_Testall, by MPI_Testany and by MPI_Testsome in turn (sched_yield between sweeps),
 *      every payload and status checked.  Only when X has finished all its rounds does it send
 *      the message the partner's W is waiting for.  So X's requests must complete while W is
 *      blocked in MPI_Wait on both ranks: a library that blocks other threads while one waits
 *      hangs, one that stops progressing fails X's deadline.  Before its rounds X also checks
 *      that MPI_Test, MPI_Testany, MPI_Testall and MPI_Testsome report a receive pending whose
 *      message the partner sends only after all its rounds.
 *   2. Threads A and B: A posts an MPI_Irecv (tag 1) and blocks in MPI_Wait; B blocks in
 *      MPI_Recv (tag 2) on the same communicator.  The partner sends the two messages (tag 1
 *      first, or tag 2 first, alternating) only once both threads are waiting (the main threads
 *      exchange a ready message).  Whichever thread's progress receives A's message, A's
 *      MPI_Wait must return with it.
 *   3. A posts an MPI_Irecv (tag 1) and then makes no MPI call; B blocks in MPI_Recv (tag 2); the
 *      partner sends tag 1, then tag 2.  When B has its message, A's (sent earlier) has arrived
 *      while only B was in the library, so B's progress has most likely matched it to A's
 *      request; A then calls MPI_Test until it reports completion (deadline 20 s) and checks the
 *      message: a completion made by another thread must be seen by the request's owner (a
 *      completion recorded only where B can see it, or a lost wake-up, fails here).
 *
 * usage: threads_waittest [rounds]   (default 30)
 */
#include "stormthread.h"

#define NREQ 16 /* half receives, half sends */
#define REL_BYTES (100 * 1024)
#define X_MAX (64 * 1024 + 1)
#define ITER2 20
#define DEADLINE 20.0

static int rank, size, partner, rounds = 30;
static MPI_Comm comm_w, comm_x, comm_ab, comm_ctl;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int w_posted, ready_count, b_done, iter_go = -1;

static void signal_state(int *var, int value)
{
    pthread_mutex_lock(&lock);
    *var = value;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

static void wait_state(int *var, int value)
{
    pthread_mutex_lock(&lock);
    while (*var < value)
        pthread_cond_wait(&changed, &lock);
    pthread_mutex_unlock(&lock);
}

static void count_ready(void)
{
    pthread_mutex_lock(&lock);
    ready_count++;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

/* ---- part 1 ---- */

static int x_len(int round, int j) { return j == 3 ? X_MAX : (round * 131 + j * 977) % 5000; }

static uint64_t x_key(int src, int dst, int round, int j)
{
    return test_key(src, dst, (size_t)x_len(round, j), round * NREQ + j);
}

static void *thread_w(void *arg)
{
    unsigned char *buf = test_malloc(REL_BYTES);
    MPI_Request rq;
    MPI_Status st;
    int count = -1;
    long bad;
    uint64_t key = test_key(partner, rank, REL_BYTES, -1);
    (void)arg;
    CHECK_MPI(MPI_Irecv(buf, REL_BYTES, MPI_BYTE, partner, 9, comm_w, &rq));
    signal_state(&w_posted, 1);
    CHECK_MPI(MPI_Wait(&rq, &st));
    CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
    CHECK(st.MPI_SOURCE == partner && st.MPI_TAG == 9 && count == REL_BYTES,
          "W: MPI_Wait gave source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, count);
    bad = pattern_check(buf, REL_BYTES, key);
    CHECK(bad < 0, "W: byte %ld of the release message is wrong", bad);
    free(buf);
    return NULL;
}

static void check_x(unsigned char *buf, const MPI_Status *st, int round, int j)
{
    int count = -1, len = x_len(round, j);
    long bad;
    CHECK_MPI(MPI_Get_count(st, MPI_BYTE, &count));
    CHECK(st->MPI_SOURCE == partner && st->MPI_TAG == j && count == len,
          "X round %d receive %d: source %d tag %d count %d, expected %d/%d/%d", round, j,
          st->MPI_SOURCE, st->MPI_TAG, count, partner, j, len);
    bad = pattern_check(buf, (size_t)len, x_key(partner, rank, round, j));
    CHECK(bad < 0, "X round %d receive %d of %d bytes: byte %ld wrong", round, j, len, bad);
}

static void *thread_x(void *arg)
{
    unsigned char *sbuf[NREQ / 2], *rbuf[NREQ / 2], *rel = test_malloc(REL_BYTES);
    MPI_Request rq[NREQ];
    MPI_Status sts[NREQ];
    int round, j, done[NREQ], ndone, flag, idx, outcount, idxs[NREQ];
    int sentinel_in[2] = {-1, -1}, sentinel_out[2];
    MPI_Request sentinel;
    long sweeps = 0;
    double t0;
    (void)arg;
    for (j = 0; j < NREQ / 2; j++) {
        sbuf[j] = test_malloc(X_MAX);
        rbuf[j] = test_malloc(X_MAX);
    }
    wait_state(&w_posted, 1);
    test_sleep_ms(5); /* W is inside MPI_Wait by now */

    /* A receive whose message the partner's X sends only after all its rounds, which need this
     * X's rounds: none of the test calls may report it complete now. */
    CHECK_MPI(MPI_Irecv(sentinel_in, 2, MPI_INT, partner, 99, comm_x, &sentinel));
    flag = -1;
    idx = -2;
    CHECK_MPI(MPI_Testany(1, &sentinel, &idx, &flag, &sts[0]));
    CHECK(flag == 0 && idx == MPI_UNDEFINED,
          "X: MPI_Testany on one pending receive gave flag %d index %d (expected 0, "
          "MPI_UNDEFINED)", flag, idx);
    flag = -1;
    CHECK_MPI(MPI_Test(&sentinel, &flag, &sts[0]));
    CHECK(flag == 0 && sentinel != MPI_REQUEST_NULL,
          "X: MPI_Test on a receive whose message cannot have been sent gave flag %d", flag);
    flag = -1;
    CHECK_MPI(MPI_Testall(1, &sentinel, &flag, sts));
    CHECK(flag == 0, "X: MPI_Testall on one pending receive gave flag %d", flag);
    outcount = -1;
    CHECK_MPI(MPI_Testsome(1, &sentinel, &outcount, idxs, sts));
    CHECK(outcount == 0, "X: MPI_Testsome on one pending receive gave outcount %d", outcount);

    for (round = 0; round < rounds; round++) {
        int mode = round % 4;
        for (j = 0; j < NREQ / 2; j++) {
            CHECK_MPI(MPI_Irecv(rbuf[j], X_MAX, MPI_BYTE, partner, j, comm_x, &rq[j]));
            pattern_fill(sbuf[j], (size_t)x_len(round, j), x_key(rank, partner, round, j));
        }
        for (j = 0; j < NREQ / 2; j++)
            CHECK_MPI(MPI_Isend(sbuf[j], x_len(round, j), MPI_BYTE, partner, j, comm_x,
                                &rq[NREQ / 2 + j]));
        for (j = 0; j < NREQ; j++)
            done[j] = 0;
        ndone = 0;
        t0 = MPI_Wtime();
        while (ndone < NREQ) {
            CHECK(MPI_Wtime() - t0 < DEADLINE,
                  "X round %d: only %d of %d requests completed after %.0f s of testing while "
                  "another thread is blocked in MPI_Wait (mode %d)",
                  round, ndone, NREQ, DEADLINE, mode);
            sweeps++;
            if (mode == 0) { /* MPI_Test on each, starting at a different one each sweep */
                for (idx = 0; idx < NREQ; idx++) {
                    j = (int)((idx + sweeps) % NREQ);
                    if (done[j])
                        continue;
                    flag = 0;
                    CHECK_MPI(MPI_Test(&rq[j], &flag, &sts[j]));
                    if (flag) {
                        CHECK(rq[j] == MPI_REQUEST_NULL,
                              "X: MPI_Test left a completed request set");
                        done[j] = 1;
                        ndone++;
                    }
                }
            } else if (mode == 1) {
                flag = 0;
                CHECK_MPI(MPI_Testall(NREQ, rq, &flag, sts));
                if (flag) {
                    for (j = 0; j < NREQ; j++)
                        done[j] = 1;
                    ndone = NREQ;
                }
            } else if (mode == 2) {
                MPI_Status one;
                flag = 0;
                idx = -1;
                CHECK_MPI(MPI_Testany(NREQ, rq, &idx, &flag, &one));
                if (flag) {
                    CHECK(idx >= 0 && idx < NREQ && !done[idx],
                          "X round %d: MPI_Testany gave index %d", round, idx);
                    sts[idx] = one;
                    done[idx] = 1;
                    ndone++;
                }
            } else {
                MPI_Status some[NREQ];
                outcount = -1;
                CHECK_MPI(MPI_Testsome(NREQ, rq, &outcount, idxs, some));
                CHECK(outcount >= 0 && outcount <= NREQ - ndone,
                      "X round %d: MPI_Testsome gave outcount %d with %d pending", round,
                      outcount, NREQ - ndone);
                for (j = 0; j < outcount; j++) {
                    CHECK(idxs[j] >= 0 && idxs[j] < NREQ && !done[idxs[j]],
                          "X round %d: MPI_Testsome gave index %d", round, idxs[j]);
                    sts[idxs[j]] = some[j];
                    done[idxs[j]] = 1;
                    ndone++;
                }
            }
            if (ndone < NREQ)
                sched_yield();
        }
        for (j = 0; j < NREQ / 2; j++)
            check_x(rbuf[j], &sts[j], round, j);
    }

    /* the partner's sentinel, then release the partner's W */
    sentinel_out[0] = rank;
    sentinel_out[1] = rounds;
    CHECK_MPI(MPI_Send(sentinel_out, 2, MPI_INT, partner, 99, comm_x));
    CHECK_MPI(MPI_Wait(&sentinel, &sts[0]));
    CHECK(sentinel_in[0] == partner && sentinel_in[1] == rounds,
          "X: the sentinel message holds %d %d", sentinel_in[0], sentinel_in[1]);
    pattern_fill(rel, REL_BYTES, test_key(rank, partner, REL_BYTES, -1));
    CHECK_MPI(MPI_Send(rel, REL_BYTES, MPI_BYTE, partner, 9, comm_w));
    for (j = 0; j < NREQ / 2; j++) {
        free(sbuf[j]);
        free(rbuf[j]);
    }
    free(rel);
    return NULL;
}

/* ---- parts 2 and 3 ---- */

static void check_ab(const int *msg, const MPI_Status *st, int tag, int it, const char *who)
{
    int count = -1;
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &count));
    CHECK(st->MPI_SOURCE == partner && st->MPI_TAG == tag && count == 4,
          "%s iteration %d: source %d tag %d count %d, expected %d/%d/4", who, it,
          st->MPI_SOURCE, st->MPI_TAG, count, partner, tag);
    CHECK(msg[0] == partner && msg[1] == tag && msg[2] == it && msg[3] == partner * 7 + it,
          "%s iteration %d: got %d %d %d %d", who, it, msg[0], msg[1], msg[2], msg[3]);
}

static void *thread_a(void *arg)
{
    int it, msg[4], flag, tests;
    MPI_Request rq;
    MPI_Status st;
    double t0;
    (void)arg;
    for (it = 0; it < 2 * ITER2; it++) {
        wait_state(&iter_go, it);
        memset(msg, 0, sizeof msg);
        CHECK_MPI(MPI_Irecv(msg, 4, MPI_INT, partner, 1, comm_ab, &rq));
        count_ready();
        if (it < ITER2) { /* part 2: blocked in MPI_Wait */
            CHECK_MPI(MPI_Wait(&rq, &st));
        } else { /* part 3: no MPI call until B has its (later) message */
            wait_state(&b_done, it + 1);
            tests = 0;
            flag = 0;
            t0 = MPI_Wtime();
            while (!flag) {
                CHECK(MPI_Wtime() - t0 < DEADLINE,
                      "A iteration %d: MPI_Test has not reported the receive of a message sent "
                      "before one that thread B has already received (%d tests in %.0f s)",
                      it, tests, DEADLINE);
                CHECK_MPI(MPI_Test(&rq, &flag, &st));
                tests++;
                if (!flag)
                    sched_yield();
            }
        }
        check_ab(msg, &st, 1, it, "A");
    }
    return NULL;
}

static void *thread_b(void *arg)
{
    int it, msg[4];
    MPI_Status st;
    (void)arg;
    for (it = 0; it < 2 * ITER2; it++) {
        wait_state(&iter_go, it);
        memset(msg, 0, sizeof msg);
        count_ready(); /* B is about to block in MPI_Recv */
        CHECK_MPI(MPI_Recv(msg, 4, MPI_INT, partner, 2, comm_ab, &st));
        check_ab(msg, &st, 2, it, "B");
        signal_state(&b_done, it + 1);
    }
    return NULL;
}

/* The main thread of parts 2 and 3: per iteration, let A and B post, tell the partner, and when
 * the partner is ready too send its two messages. */
static void drive_ab(void)
{
    int it, t, order, msg[2][4], go = 1, got = 0;
    MPI_Request rq[2];
    for (it = 0; it < 2 * ITER2; it++) {
        signal_state(&iter_go, it);
        wait_state(&ready_count, 2 * (it + 1));
        test_sleep_ms(1); /* A and B are inside their calls by now */
        /* partner ready too? (self: trivially) */
        CHECK_MPI(MPI_Sendrecv(&go, 1, MPI_INT, partner, 0, &got, 1, MPI_INT, partner, 0,
                               comm_ctl, MPI_STATUS_IGNORE));
        order = it < ITER2 ? it % 2 : 0; /* part 3: tag 1 first */
        for (t = 0; t < 2; t++) {
            int tag = (t + order) % 2 + 1;
            msg[t][0] = rank;
            msg[t][1] = tag;
            msg[t][2] = it;
            msg[t][3] = rank * 7 + it;
            CHECK_MPI(MPI_Isend(msg[t], 4, MPI_INT, partner, tag, comm_ab, &rq[t]));
        }
        CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
    }
}

int main(int argc, char **argv)
{
    pthread_t t1, t2;

    test_init_multiple(&argc, &argv, "threads_waittest");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1)
        rounds = atoi(argv[1]);
    CHECK(rounds > 0, "usage: threads_waittest [rounds]");
    partner = rank ^ 1;
    if (partner >= size)
        partner = rank;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm_w));
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm_x));
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm_ab));
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm_ctl));

    /* part 1 */
    CHECK(pthread_create(&t1, NULL, thread_w, NULL) == 0, "pthread_create");
    CHECK(pthread_create(&t2, NULL, thread_x, NULL) == 0, "pthread_create");
    CHECK(pthread_join(t1, NULL) == 0 && pthread_join(t2, NULL) == 0, "pthread_join");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* parts 2 and 3 */
    CHECK(pthread_create(&t1, NULL, thread_a, NULL) == 0, "pthread_create");
    CHECK(pthread_create(&t2, NULL, thread_b, NULL) == 0, "pthread_create");
    drive_ab();
    CHECK(pthread_join(t1, NULL) == 0 && pthread_join(t2, NULL) == 0, "pthread_join");

    CHECK_MPI(MPI_Comm_free(&comm_w));
    CHECK_MPI(MPI_Comm_free(&comm_x));
    CHECK_MPI(MPI_Comm_free(&comm_ab));
    CHECK_MPI(MPI_Comm_free(&comm_ctl));
    return test_end();
}
