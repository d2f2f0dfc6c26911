/*
 * probe.c - MPI_Probe / MPI_Iprobe and matched probes (MPI_Mprobe, MPI_Improbe, MPI_Mrecv,
 * MPI_Imrecv).
 *
 * Every rank sends to its right neighbour and probes/receives from its left one.
 *   1. messages of unknown size (0 B .. 1 MiB, tags in a scrambled order): MPI_Probe with
 *      ANY_TAG, probe again (a probe must not consume: same tag and count), MPI_Iprobe (same),
 *      MPI_Get_count, allocate exactly that much, MPI_Recv with the probed source/tag; the
 *      messages must come out in send order and with the right content;
 *   2. MPI_Iprobe for a tag nobody sends reports false;
 *   3. matched probes: A and B (same tag) and C (another tag) are sent.  MPI_Mprobe takes A out
 *      of the matching queue, so a following MPI_Iprobe for that tag must see B; MPI_Improbe
 *      takes B, then C; they are received in reverse order with MPI_Imrecv and MPI_Mrecv;
 *   4. probes on MPI_PROC_NULL return at once (MPI_MESSAGE_NO_PROC for matched probes), and
 *      MPI_Mrecv of MPI_MESSAGE_NO_PROC returns an empty status from MPI_PROC_NULL;
 *   5. rank 0 probes with MPI_ANY_SOURCE for one message from every other rank.
 */
#include "stormtest.h"

static int rank, size, left, right;

static void recv_check(void *buf, int len, int src, int seq, const MPI_Status *st, const char *what)
{
    int count = -1;
    long off;
    CHECK_MPI(MPI_Get_count(st, MPI_BYTE, &count));
    CHECK(count == len && st->MPI_SOURCE == src, "%s: count %d source %d, expected %d from %d",
          what, count, st->MPI_SOURCE, len, src);
    off = pattern_check(buf, (size_t)len, test_key(src, rank, (size_t)len, seq));
    CHECK(off < 0, "%s: %d B message wrong at byte %ld", what, len, off);
}

static double deadline;
static void wait_flag(int *flag, const char *what)
{
    if (!*flag) {
        CHECK(MPI_Wtime() < deadline, "%s: Iprobe/Improbe never found the message", what);
        test_sleep_ms(1);
    }
}

int main(int argc, char **argv)
{
    static const int sizes[] = {100, 0, 1048576, 5000, 1, 70000};
    static const int tags[] = {14, 11, 13, 10, 15, 12};
    enum { N = 6 };
    MPI_Request sreq[N], r;
    MPI_Status st, st2;
    unsigned char *sbuf[N];
    int i, flag, count, count2;

    MPI_Init(&argc, &argv);
    test_begin("probe");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    deadline = MPI_Wtime() + 30.0;

    /* 1. unknown sizes */
    for (i = 0; i < N; i++) {
        sbuf[i] = test_malloc((size_t)sizes[i]);
        pattern_fill(sbuf[i], (size_t)sizes[i], test_key(rank, right, (size_t)sizes[i], i));
        CHECK_MPI(MPI_Isend(sbuf[i], sizes[i], MPI_BYTE, right, tags[i], MPI_COMM_WORLD, &sreq[i]));
    }
    for (i = 0; i < N; i++) {
        unsigned char *buf;
        CHECK_MPI(MPI_Probe(left, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        CHECK(st.MPI_SOURCE == left && st.MPI_TAG == tags[i],
              "Probe %d: source %d tag %d, expected %d/%d (send order)", i, st.MPI_SOURCE, st.MPI_TAG,
              left, tags[i]);
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
        CHECK(count == sizes[i], "Probe %d: count %d, expected %d", i, count, sizes[i]);
        CHECK_MPI(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st2));
        CHECK_MPI(MPI_Get_count(&st2, MPI_BYTE, &count2));
        /* only the left neighbour sends to this rank in this part */
        CHECK(st2.MPI_SOURCE == left && st2.MPI_TAG == st.MPI_TAG && count2 == count,
              "second Probe saw source %d tag %d count %d: the first Probe consumed the message",
              st2.MPI_SOURCE, st2.MPI_TAG, count2);
        flag = 0;
        CHECK_MPI(MPI_Iprobe(left, st.MPI_TAG, MPI_COMM_WORLD, &flag, &st2));
        CHECK_MPI(MPI_Get_count(&st2, MPI_BYTE, &count2));
        CHECK(flag && st2.MPI_TAG == st.MPI_TAG && count2 == count,
              "Iprobe after Probe: flag %d tag %d count %d", flag, st2.MPI_TAG, count2);
        buf = test_malloc((size_t)count);
        CHECK_MPI(MPI_Recv(buf, count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st2));
        CHECK(st2.MPI_TAG == tags[i], "Recv after Probe got tag %d, expected %d", st2.MPI_TAG, tags[i]);
        recv_check(buf, sizes[i], left, i, &st2, "probed receive");
        free(buf);
    }
    CHECK_MPI(MPI_Waitall(N, sreq, MPI_STATUSES_IGNORE));

    /* 2. nobody sends tag 999 */
    for (i = 0; i < 5; i++) {
        flag = 1;
        CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &flag, &st));
        CHECK(!flag, "Iprobe found a message with tag 999 that was never sent");
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* 3. matched probes: A (tag 5, 3000 B), B (tag 5, 200000 B), C (tag 6, 10 B) */
    {
        static const int msz[3] = {3000, 200000, 10}, mtag[3] = {5, 5, 6};
        MPI_Message ma, mb, mc, mx = MPI_MESSAGE_NULL;
        unsigned char *rb[3];
        for (i = 0; i < 3; i++) {
            free(sbuf[i]);
            sbuf[i] = test_malloc((size_t)msz[i]);
            pattern_fill(sbuf[i], (size_t)msz[i], test_key(rank, right, (size_t)msz[i], 50 + i));
            CHECK_MPI(MPI_Isend(sbuf[i], msz[i], MPI_BYTE, right, mtag[i], MPI_COMM_WORLD, &sreq[i]));
            rb[i] = test_malloc((size_t)msz[i]);
        }
        CHECK_MPI(MPI_Mprobe(left, 5, MPI_COMM_WORLD, &ma, &st));
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
        CHECK(ma != MPI_MESSAGE_NULL && ma != MPI_MESSAGE_NO_PROC && count == msz[0] &&
                  st.MPI_SOURCE == left && st.MPI_TAG == 5,
              "Mprobe: count %d source %d tag %d", count, st.MPI_SOURCE, st.MPI_TAG);
        flag = 0;
        do {
            CHECK_MPI(MPI_Iprobe(left, 5, MPI_COMM_WORLD, &flag, &st));
            wait_flag(&flag, "Iprobe after Mprobe");
        } while (!flag);
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
        CHECK(count == msz[1], "Iprobe after Mprobe sees %d B, expected B (%d B): Mprobe did not "
              "remove A from matching", count, msz[1]);
        flag = 0;
        do {
            CHECK_MPI(MPI_Improbe(left, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &mb, &st));
            wait_flag(&flag, "Improbe for B");
        } while (!flag);
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
        CHECK(count == msz[1] && st.MPI_TAG == 5, "Improbe: got %d B tag %d, expected B", count,
              st.MPI_TAG);
        flag = 0;
        do {
            CHECK_MPI(MPI_Improbe(left, 6, MPI_COMM_WORLD, &flag, &mc, &st));
            wait_flag(&flag, "Improbe for C");
        } while (!flag);
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
        CHECK(count == msz[2] && st.MPI_TAG == 6, "Improbe: got %d B tag %d, expected C", count,
              st.MPI_TAG);
        flag = 1;
        CHECK_MPI(MPI_Improbe(left, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &mx, &st));
        CHECK(!flag, "Improbe found a fourth message; A, B, C should all be taken");

        CHECK_MPI(MPI_Imrecv(rb[2], msz[2], MPI_BYTE, &mc, &r));
        CHECK(mc == MPI_MESSAGE_NULL, "Imrecv did not set the message handle to MPI_MESSAGE_NULL");
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK(st.MPI_TAG == 6, "Imrecv of C: tag %d", st.MPI_TAG);
        recv_check(rb[2], msz[2], left, 52, &st, "Imrecv of C");
        CHECK_MPI(MPI_Mrecv(rb[1], msz[1], MPI_BYTE, &mb, &st));
        CHECK(mb == MPI_MESSAGE_NULL, "Mrecv did not set the message handle to MPI_MESSAGE_NULL");
        recv_check(rb[1], msz[1], left, 51, &st, "Mrecv of B");
        CHECK_MPI(MPI_Mrecv(rb[0], msz[0], MPI_BYTE, &ma, &st));
        recv_check(rb[0], msz[0], left, 50, &st, "Mrecv of A");
        CHECK_MPI(MPI_Waitall(3, sreq, MPI_STATUSES_IGNORE));
        for (i = 0; i < 3; i++)
            free(rb[i]);
    }

    /* 4. MPI_PROC_NULL */
    {
        MPI_Message m = MPI_MESSAGE_NULL;
        CHECK_MPI(MPI_Probe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &st));
        CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG,
              "Probe(MPI_PROC_NULL): source %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
        flag = 0;
        CHECK_MPI(MPI_Iprobe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &flag, &st));
        CHECK(flag && st.MPI_SOURCE == MPI_PROC_NULL, "Iprobe(MPI_PROC_NULL): flag %d source %d",
              flag, st.MPI_SOURCE);
        CHECK_MPI(MPI_Mprobe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &m, &st));
        CHECK(m == MPI_MESSAGE_NO_PROC && st.MPI_SOURCE == MPI_PROC_NULL,
              "Mprobe(MPI_PROC_NULL) did not give MPI_MESSAGE_NO_PROC (source %d)", st.MPI_SOURCE);
        CHECK_MPI(MPI_Mrecv(sbuf[0], 10, MPI_BYTE, &m, &st));
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
        CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && count == 0,
              "Mrecv(MPI_MESSAGE_NO_PROC): source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG,
              count);
        CHECK(m == MPI_MESSAGE_NULL, "Mrecv(MPI_MESSAGE_NO_PROC) left the handle non-null");
        flag = 0;
        CHECK_MPI(MPI_Improbe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &flag, &m, &st));
        CHECK(flag && m == MPI_MESSAGE_NO_PROC, "Improbe(MPI_PROC_NULL): flag %d", flag);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* 5. rank 0 probes with ANY_SOURCE for one message from each other rank */
    if (rank == 0) {
        int seen[64] = {0};
        CHECK(size <= 64, "too many ranks");
        for (i = 1; i < size; i++) {
            unsigned char *buf;
            CHECK_MPI(MPI_Probe(MPI_ANY_SOURCE, 77, MPI_COMM_WORLD, &st));
            CHECK(st.MPI_SOURCE > 0 && st.MPI_SOURCE < size && !seen[st.MPI_SOURCE],
                  "ANY_SOURCE probe: source %d", st.MPI_SOURCE);
            seen[st.MPI_SOURCE] = 1;
            CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
            buf = test_malloc((size_t)count);
            CHECK_MPI(MPI_Recv(buf, count, MPI_BYTE, st.MPI_SOURCE, 77, MPI_COMM_WORLD, &st2));
            recv_check(buf, 1000 * st.MPI_SOURCE, st.MPI_SOURCE, 77, &st2, "ANY_SOURCE probe");
            free(buf);
        }
    } else {
        unsigned char *buf = test_malloc((size_t)(1000 * rank));
        pattern_fill(buf, (size_t)(1000 * rank), test_key(rank, 0, (size_t)(1000 * rank), 77));
        CHECK_MPI(MPI_Send(buf, 1000 * rank, MPI_BYTE, 0, 77, MPI_COMM_WORLD));
        free(buf);
    }
    for (i = 0; i < N; i++)
        free(sbuf[i]);
    return test_end();
}
