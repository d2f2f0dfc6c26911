/*
 * threads_probe.c - matched probe (MPI_Mprobe/MPI_Improbe + MPI_Mrecv/MPI_Imrecv) from several
 * threads on one communicator, the reason matched probes exist: with MPI_Probe + MPI_Recv,
 * another thread could receive the probed message in between.
 *
 * Ranks are paired (0-1, 2-3, ...; with an odd number the last rank is its own partner).  On
 * every rank 2 sender threads send `count` messages each to the partner, all with the same tag
 * on the same communicator, 16 B .. 3000 B with some of 70000 B (rendezvous); each message
 * starts with (sender rank, sender thread, sequence number, length) and continues with a
 * pattern keyed by those.  3 receiver threads take them without knowing their sizes: claim one
 * of the messages still due (a shared counter), probe it (MPI_Mprobe with the partner as source,
 * MPI_Mprobe with MPI_ANY_SOURCE, or an MPI_Improbe loop), size a buffer with MPI_Get_count,
 * receive it with MPI_Mrecv or MPI_Imrecv + MPI_Wait.
 * Checked: count, header and pattern of every message; every message is received exactly once
 * (a probed message that another thread can still match is received twice, or a matched message
 * is lost and the receivers hang); the messages one receiver gets from one sender thread come in
 * the order they were sent (a single thread's sends are ordered); nothing is left over at the
 * end (MPI_Iprobe).
 *
 * usage: threads_probe [count]   (default 300 per sender thread)
 */
#include "stormthread.h"

#define NSEND 2
#define NRECV 3
#define TAG 6
#define BIGLEN 70000
#define DEADLINE 20.0

static int rank, size, partner, count = 300;
static MPI_Comm comm;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int claimed;                 /* messages claimed by receivers so far */
static unsigned char *seen[NSEND]; /* seen[s][seq] */

struct thread {
    int id;
    int next[NSEND]; /* receivers: lowest sequence number still acceptable per sender thread */
    long got;
};

static int msg_len(int s, int seq)
{
    if (seq % 53 == 7 + s)
        return BIGLEN;
    return 16 + (seq * 211 + s * 97) % 2985;
}

static void *sender(void *arg)
{
    struct thread *t = (struct thread *)arg;
    unsigned char *buf = test_malloc(BIGLEN);
    int seq, len, hdr[4];
    for (seq = 0; seq < count; seq++) {
        len = msg_len(t->id, seq);
        hdr[0] = rank;
        hdr[1] = t->id;
        hdr[2] = seq;
        hdr[3] = len;
        memcpy(buf, hdr, sizeof hdr);
        pattern_fill(buf + 16, (size_t)len - 16, test_key(rank, t->id, (size_t)len, seq));
        CHECK_MPI(MPI_Send(buf, len, MPI_BYTE, partner, TAG, comm));
    }
    free(buf);
    return NULL;
}

static void *receiver(void *arg)
{
    struct thread *t = (struct thread *)arg;
    int total = NSEND * count, n = 0, flag, len = -1, hdr[4], mode;
    long bad;
    MPI_Message msg;
    MPI_Status st;
    MPI_Request rq;
    unsigned char *buf;
    double t0;
    for (;;) {
        pthread_mutex_lock(&lock);
        if (claimed == total) {
            pthread_mutex_unlock(&lock);
            break;
        }
        claimed++;
        pthread_mutex_unlock(&lock);

        mode = (n + t->id) % 3;
        msg = MPI_MESSAGE_NULL;
        if (mode == 0) {
            CHECK_MPI(MPI_Mprobe(partner, TAG, comm, &msg, &st));
        } else if (mode == 1) {
            CHECK_MPI(MPI_Mprobe(MPI_ANY_SOURCE, TAG, comm, &msg, &st));
        } else {
            flag = 0;
            t0 = MPI_Wtime();
            for (;;) {
                CHECK_MPI(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &msg, &st));
                if (flag)
                    break;
                CHECK(MPI_Wtime() - t0 < DEADLINE,
                      "receiver %d: MPI_Improbe found nothing for %.0f s with a message due", t->id,
                      DEADLINE);
                sched_yield();
            }
        }
        CHECK(msg != MPI_MESSAGE_NULL, "receiver %d: matched probe gave MPI_MESSAGE_NULL", t->id);
        CHECK(st.MPI_SOURCE == partner && st.MPI_TAG == TAG,
              "receiver %d: probe status source %d tag %d, expected %d/%d", t->id, st.MPI_SOURCE,
              st.MPI_TAG, partner, TAG);
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &len));
        CHECK(len >= 16 && len <= BIGLEN, "receiver %d: probed a message of %d bytes", t->id, len);
        buf = test_malloc((size_t)len);
        if (n % 2) {
            CHECK_MPI(MPI_Mrecv(buf, len, MPI_BYTE, &msg, &st));
        } else {
            CHECK_MPI(MPI_Imrecv(buf, len, MPI_BYTE, &msg, &rq));
            CHECK_MPI(MPI_Wait(&rq, &st));
        }
        CHECK(msg == MPI_MESSAGE_NULL, "receiver %d: the message handle was not set to "
                                       "MPI_MESSAGE_NULL by the receive", t->id);
        memcpy(hdr, buf, sizeof hdr);
        CHECK(hdr[0] == partner && hdr[1] >= 0 && hdr[1] < NSEND && hdr[2] >= 0 &&
                  hdr[2] < count && hdr[3] == len && msg_len(hdr[1], hdr[2]) == len,
              "receiver %d: probed %d bytes, received a message with header %d %d %d %d",
              t->id, len, hdr[0], hdr[1], hdr[2], hdr[3]);
        {
            int c2 = -1;
            CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &c2));
            CHECK(c2 == len && st.MPI_SOURCE == partner && st.MPI_TAG == TAG,
                  "receiver %d: receive status count %d source %d tag %d after probing %d bytes",
                  t->id, c2, st.MPI_SOURCE, st.MPI_TAG, len);
        }
        bad = pattern_check(buf + 16, (size_t)len - 16,
                            test_key(partner, hdr[1], (size_t)len, hdr[2]));
        CHECK(bad < 0, "receiver %d: message %d of sender thread %d (%d bytes): byte %ld wrong",
              t->id, hdr[2], hdr[1], len, bad + 16);
        CHECK(hdr[2] >= t->next[hdr[1]],
              "receiver %d: message %d of sender thread %d after message %d of that thread "
              "(order broken)",
              t->id, hdr[2], hdr[1], t->next[hdr[1]] - 1);
        t->next[hdr[1]] = hdr[2] + 1;
        pthread_mutex_lock(&lock);
        CHECK(!seen[hdr[1]][hdr[2]], "receiver %d: message %d of sender thread %d received twice",
              t->id, hdr[2], hdr[1]);
        seen[hdr[1]][hdr[2]] = 1;
        pthread_mutex_unlock(&lock);
        free(buf);
        n++;
        t->got++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    struct thread ts[NSEND + NRECV];
    int i, s, flag = 1;
    long got = 0;
    MPI_Status st;

    test_init_multiple(&argc, &argv, "threads_probe");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1)
        count = atoi(argv[1]);
    CHECK(count > 0, "usage: threads_probe [count]");
    partner = rank ^ 1;
    if (partner >= size)
        partner = rank;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    for (s = 0; s < NSEND; s++) {
        seen[s] = test_malloc((size_t)count);
        memset(seen[s], 0, (size_t)count);
    }
    for (i = 0; i < NSEND + NRECV; i++) {
        memset(&ts[i], 0, sizeof ts[i]);
        ts[i].id = i < NSEND ? i : i - NSEND;
    }
    /* ts[0..NSEND-1] are the senders (ids 0..NSEND-1), the rest the receivers (0..NRECV-1) */
    {
        pthread_t tids[NSEND + NRECV];
        for (i = 0; i < NSEND + NRECV; i++)
            CHECK(pthread_create(&tids[i], NULL, i < NSEND ? sender : receiver, &ts[i]) == 0,
                  "pthread_create");
        for (i = 0; i < NSEND + NRECV; i++)
            CHECK(pthread_join(tids[i], NULL) == 0, "pthread_join");
    }
    for (i = NSEND; i < NSEND + NRECV; i++)
        got += ts[i].got;
    CHECK(got == (long)NSEND * count, "received %ld messages, expected %ld", got,
          (long)NSEND * count);
    for (s = 0; s < NSEND; s++)
        for (i = 0; i < count; i++)
            CHECK(seen[s][i], "message %d of sender thread %d never received", i, s);
    CHECK_MPI(MPI_Barrier(comm)); /* all sends done everywhere */
    CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &st));
    CHECK(!flag, "a message (source %d tag %d) is left over after all were received",
          st.MPI_SOURCE, st.MPI_TAG);
    for (s = 0; s < NSEND; s++)
        free(seen[s]);
    CHECK_MPI(MPI_Comm_free(&comm));
    return test_end();
}
