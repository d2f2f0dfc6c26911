/*
 * threads_pingpong.c - 4 threads per rank ping-pong at the same time, every payload checked.
 *
 * Ranks are paired (0 with 1, 2 with 3, ...; with an odd number of ranks the last one plays both
 * sides with itself).  Thread k of a rank talks only to thread k of its partner.
 *   A. Each thread has a communicator of its own (4 MPI_Comm_dup of MPI_COMM_WORLD, made by the
 *      main thread before the threads start).  Blocking MPI_Send/MPI_Recv ping-pong with the
 *      specific source and a tag that changes with the iteration; message sizes cycle through
 *      0 B .. 5000 B, with sizes around sm's eager limit (4 KiB), 16 KiB, 64 KiB + 1 and
 *      200 KiB mixed in (above every eager limit: rendezvous while other threads' small messages
 *      flow).  `messages` in all over the job (default 100000).
 *   B. All threads share MPI_COMM_WORLD and tell their traffic apart by tag (100 + k); the
 *      initiator pre-posts its MPI_Irecv for the answer before it sends, then MPI_Wait.
 *      messages / 4 in all.
 * Every message is a pattern keyed by (source rank, destination rank, length, thread,
 * iteration, direction), so a payload delivered to the wrong thread, a torn or stale buffer,
 * or a wrong length is caught; status source, tag and count are checked, and 8 guard bytes
 * after the received message must be untouched.
 *
 * usage: threads_pingpong [messages]
 */
#include "stormthread.h"

#define NTHREADS 4
#define MAXLEN (200 * 1024)
#define GUARD 8

static int rank, size, partner;
static long iters_a, iters_b;
static MPI_Comm comms[NTHREADS];

struct worker {
    int id;
    unsigned char *sbuf, *rbuf;
    long received[2]; /* messages received and checked, per section */
};

/* Size of message i of thread k (dir 0: ping, 1: pong). */
static int msg_len(int k, long i, int dir)
{
    static const int small[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 64, 100, 127, 128, 255,
                                256, 511, 1000, 1024, 1500, 2047, 3000, 4000, 5000};
    const int nsmall = (int)(sizeof small / sizeof small[0]);
    long j = i * 2 + dir + k;
    if (j % 509 == 17)
        return MAXLEN - (int)(j % 3);
    if (j % 61 == 5)
        return 65536 + 1;
    if (j % 37 == 3)
        return 16384;
    if (j % 23 == 1)
        return 4096 - 16 + (int)(j % 32); /* around sm's eager limit, header included or not */
    return small[(j * 7 + k) % nsmall];
}

static uint64_t msg_key(int src, int dst, int len, int k, long i, int dir, int section)
{
    return test_key(src, dst, (size_t)len, (int)((i * NTHREADS + k) * 4 + dir * 2 + section));
}

static void check_msg(struct worker *w, const MPI_Status *st, int src, int tag, int len, long i,
                      int dir, int section)
{
    int count = -1, g;
    long bad;
    CHECK_MPI(MPI_Get_count(st, MPI_BYTE, &count));
    CHECK(st->MPI_SOURCE == src && st->MPI_TAG == tag && count == len,
          "section %c thread %d iteration %ld %s: status source %d tag %d count %d, expected "
          "%d/%d/%d",
          'A' + section, w->id, i, dir ? "pong" : "ping", st->MPI_SOURCE, st->MPI_TAG, count, src,
          tag, len);
    bad = pattern_check(w->rbuf, (size_t)len, msg_key(src, rank, len, w->id, i, dir, section));
    CHECK(bad < 0,
          "section %c thread %d iteration %ld %s of %d bytes from rank %d: byte %ld is 0x%02x, "
          "expected 0x%02x (wrong thread's or a stale payload?)",
          'A' + section, w->id, i, dir ? "pong" : "ping", len, src, bad, w->rbuf[bad],
          pattern_byte(msg_key(src, rank, len, w->id, i, dir, section), (size_t)bad));
    for (g = 0; g < GUARD; g++)
        CHECK(w->rbuf[len + g] == 0xa5,
              "section %c thread %d iteration %ld: guard byte %d after the %d-byte message "
              "overwritten",
              'A' + section, w->id, i, g, len);
    w->received[section]++;
}

static void arm_guard(struct worker *w, int len) { memset(w->rbuf + len, 0xa5, GUARD); }

/* One round trip of section A (own communicator, blocking calls). */
static void round_a(struct worker *w, long i)
{
    MPI_Comm comm = comms[w->id];
    int tag = (int)(i % 7), ping = msg_len(w->id, i, 0), pong = msg_len(w->id, i, 1);
    MPI_Status st;
    if (partner == rank) { /* both sides here */
        MPI_Request rq[2];
        pattern_fill(w->sbuf, (size_t)ping, msg_key(rank, rank, ping, w->id, i, 0, 0));
        arm_guard(w, ping);
        CHECK_MPI(MPI_Isend(w->sbuf, ping, MPI_BYTE, rank, tag, comm, &rq[0]));
        CHECK_MPI(MPI_Recv(w->rbuf, MAXLEN, MPI_BYTE, rank, tag, comm, &st));
        CHECK_MPI(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
        check_msg(w, &st, rank, tag, ping, i, 0, 0);
        pattern_fill(w->sbuf, (size_t)pong, msg_key(rank, rank, pong, w->id, i, 1, 0));
        arm_guard(w, pong);
        CHECK_MPI(MPI_Isend(w->sbuf, pong, MPI_BYTE, rank, tag, comm, &rq[1]));
        CHECK_MPI(MPI_Recv(w->rbuf, MAXLEN, MPI_BYTE, rank, tag, comm, &st));
        CHECK_MPI(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
        check_msg(w, &st, rank, tag, pong, i, 1, 0);
    } else if (rank < partner) {
        pattern_fill(w->sbuf, (size_t)ping, msg_key(rank, partner, ping, w->id, i, 0, 0));
        CHECK_MPI(MPI_Send(w->sbuf, ping, MPI_BYTE, partner, tag, comm));
        arm_guard(w, pong);
        CHECK_MPI(MPI_Recv(w->rbuf, MAXLEN, MPI_BYTE, partner, tag, comm, &st));
        check_msg(w, &st, partner, tag, pong, i, 1, 0);
    } else {
        arm_guard(w, ping);
        CHECK_MPI(MPI_Recv(w->rbuf, MAXLEN, MPI_BYTE, partner, tag, comm, &st));
        check_msg(w, &st, partner, tag, ping, i, 0, 0);
        pattern_fill(w->sbuf, (size_t)pong, msg_key(rank, partner, pong, w->id, i, 1, 0));
        CHECK_MPI(MPI_Send(w->sbuf, pong, MPI_BYTE, partner, tag, comm));
    }
}

/* One round trip of section B (MPI_COMM_WORLD shared, tag per thread, pre-posted answers). */
static void round_b(struct worker *w, long i)
{
    int tag = 100 + w->id, ping = msg_len(w->id, i + 11, 0), pong = msg_len(w->id, i + 11, 1);
    MPI_Request rq[2];
    MPI_Status st[2];
    if (partner == rank) {
        pattern_fill(w->sbuf, (size_t)ping, msg_key(rank, rank, ping, w->id, i, 0, 1));
        arm_guard(w, ping);
        CHECK_MPI(MPI_Irecv(w->rbuf, MAXLEN, MPI_BYTE, rank, tag, MPI_COMM_WORLD, &rq[0]));
        CHECK_MPI(MPI_Isend(w->sbuf, ping, MPI_BYTE, rank, tag, MPI_COMM_WORLD, &rq[1]));
        CHECK_MPI(MPI_Waitall(2, rq, st));
        check_msg(w, &st[0], rank, tag, ping, i, 0, 1);
        pattern_fill(w->sbuf, (size_t)pong, msg_key(rank, rank, pong, w->id, i, 1, 1));
        arm_guard(w, pong);
        CHECK_MPI(MPI_Irecv(w->rbuf, MAXLEN, MPI_BYTE, rank, tag, MPI_COMM_WORLD, &rq[0]));
        CHECK_MPI(MPI_Send(w->sbuf, pong, MPI_BYTE, rank, tag, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Wait(&rq[0], &st[0]));
        check_msg(w, &st[0], rank, tag, pong, i, 1, 1);
    } else if (rank < partner) {
        arm_guard(w, pong);
        CHECK_MPI(MPI_Irecv(w->rbuf, MAXLEN, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &rq[0]));
        pattern_fill(w->sbuf, (size_t)ping, msg_key(rank, partner, ping, w->id, i, 0, 1));
        CHECK_MPI(MPI_Send(w->sbuf, ping, MPI_BYTE, partner, tag, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Wait(&rq[0], &st[0]));
        check_msg(w, &st[0], partner, tag, pong, i, 1, 1);
    } else {
        arm_guard(w, ping);
        CHECK_MPI(MPI_Recv(w->rbuf, MAXLEN, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &st[0]));
        check_msg(w, &st[0], partner, tag, ping, i, 0, 1);
        pattern_fill(w->sbuf, (size_t)pong, msg_key(rank, partner, pong, w->id, i, 1, 1));
        CHECK_MPI(MPI_Send(w->sbuf, pong, MPI_BYTE, partner, tag, MPI_COMM_WORLD));
    }
}

static void *worker_a(void *arg)
{
    struct worker *w = (struct worker *)arg;
    long i;
    for (i = 0; i < iters_a; i++)
        round_a(w, i);
    return NULL;
}

static void *worker_b(void *arg)
{
    struct worker *w = (struct worker *)arg;
    long i;
    for (i = 0; i < iters_b; i++)
        round_b(w, i);
    return NULL;
}

int main(int argc, char **argv)
{
    struct worker ws[NTHREADS];
    long messages = 100000, units, total[2], sum[2];
    int k;

    test_init_multiple(&argc, &argv, "threads_pingpong");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1)
        messages = atol(argv[1]);
    CHECK(messages > 0, "usage: threads_pingpong [messages]");
    partner = rank ^ 1;
    if (partner >= size)
        partner = rank;
    /* a "unit" is a pair of ranks, or the odd rank out playing both sides */
    units = (size + 1) / 2;
    iters_a = messages / (2L * NTHREADS * units);
    iters_b = messages / 4 / (2L * NTHREADS * units);
    if (iters_a < 1)
        iters_a = 1;
    if (iters_b < 1)
        iters_b = 1;

    for (k = 0; k < NTHREADS; k++) {
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comms[k]));
        ws[k].id = k;
        ws[k].sbuf = test_malloc(MAXLEN);
        ws[k].rbuf = test_malloc(MAXLEN + GUARD);
        ws[k].received[0] = ws[k].received[1] = 0;
    }

    test_run_threads(NTHREADS, worker_a, ws, sizeof ws[0]);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    test_run_threads(NTHREADS, worker_b, ws, sizeof ws[0]);

    /* every rank received one message per round trip and thread (two if alone) */
    total[0] = total[1] = 0;
    for (k = 0; k < NTHREADS; k++) {
        total[0] += ws[k].received[0];
        total[1] += ws[k].received[1];
    }
    CHECK_MPI(MPI_Allreduce(total, sum, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum[0] == 2 * iters_a * NTHREADS * units && sum[1] == 2 * iters_b * NTHREADS * units,
          "message totals %ld/%ld", sum[0], sum[1]);
    if (rank == 0) {
        printf("threads_pingpong: %d ranks x %d threads: %ld messages on per-thread "
               "communicators, %ld on MPI_COMM_WORLD\n",
               size, NTHREADS, sum[0], sum[1]);
        fflush(stdout);
    }

    for (k = 0; k < NTHREADS; k++) {
        CHECK_MPI(MPI_Comm_free(&comms[k]));
        free(ws[k].sbuf);
        free(ws[k].rbuf);
    }
    return test_end();
}
