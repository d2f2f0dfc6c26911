/*
 * wildcard.c - receives with MPI_ANY_SOURCE and/or MPI_ANY_TAG.
 *
 * One rank (the root; the test runs with root 0 and then root size-1) receives M messages from
 * every other rank.  Each message carries (sender, sequence number, tag, filler) and its length
 * and tag vary with the sequence number.  For every receive the status source, tag and count are
 * checked against the payload, and the sequence numbers seen from each sender must be
 * consecutive: messages from one sender on one communicator are non-overtaking, whatever the tag.
 *   A. receives pre-posted as MPI_Irecv(ANY_SOURCE, ANY_TAG) before any message is sent (the
 *      senders wait for a barrier), completed by MPI_Waitall; matching is in posting order;
 *   B. blocking MPI_Recv(ANY_SOURCE, ANY_TAG) while the messages stream in (unexpected ones too);
 *   C. MPI_ANY_SOURCE with a fixed tag: senders interleave tags 1 and 2, the root first takes all
 *      tag-2 messages, then all tag-1 messages;
 *   D. fixed source with MPI_ANY_TAG, senders taken in reverse rank order.
 */
#include "stormtest.h"

#define M 24
#define MAXLEN 64

static int rank, size;

static int msg_tag(int src, int seq) { return (src * 7 + seq * 3) % 11; }
static int msg_len(int seq) { return 4 + (seq % 5) * 15; }

static void fill(int *buf, int src, int seq, int tag, int len)
{
    int i;
    buf[0] = src;
    buf[1] = seq;
    buf[2] = tag;
    for (i = 3; i < len; i++)
        buf[i] = src * 100000 + seq * 100 + i;
}

/* Check one received message; next_seq[src] is the sequence number expected from src. */
static void check_msg(const char *phase, const int *buf, const MPI_Status *st, int *next_seq,
                      int expect_tag_override)
{
    int count = -1, i, src = st->MPI_SOURCE;
    CHECK(src >= 0 && src < size && src != rank, "%s: status source %d", phase, src);
    CHECK(buf[0] == src, "%s: status says source %d but payload was sent by %d", phase, src, buf[0]);
    CHECK(buf[1] == next_seq[src], "%s: from %d got sequence %d, expected %d (order broken)", phase,
          src, buf[1], next_seq[src]);
    CHECK(st->MPI_TAG == buf[2], "%s: from %d seq %d: status tag %d, sent with tag %d", phase, src,
          buf[1], st->MPI_TAG, buf[2]);
    if (expect_tag_override >= 0)
        CHECK(st->MPI_TAG == expect_tag_override, "%s: status tag %d, expected %d", phase,
              st->MPI_TAG, expect_tag_override);
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &count));
    CHECK(count == msg_len(buf[1]), "%s: from %d seq %d: count %d, expected %d", phase, src, buf[1],
          count, msg_len(buf[1]));
    for (i = 3; i < count; i++)
        CHECK(buf[i] == src * 100000 + buf[1] * 100 + i, "%s: from %d seq %d: element %d is %d",
              phase, src, buf[1], i, buf[i]);
    next_seq[src]++;
}

/* Senders: M messages to root with tag msg_tag (tag_fn 0), or alternating tags 1/2 (tag_fn 1). */
static void send_all(int root, int tag_fn)
{
    static int bufs[M][MAXLEN];
    MPI_Request reqs[M];
    int i;
    for (i = 0; i < M; i++) {
        int tag = tag_fn ? 1 + (i % 2) : msg_tag(rank, i);
        fill(bufs[i], rank, i, tag, msg_len(i));
        CHECK_MPI(MPI_Isend(bufs[i], msg_len(i), MPI_INT, root, tag, MPI_COMM_WORLD, &reqs[i]));
    }
    CHECK_MPI(MPI_Waitall(M, reqs, MPI_STATUSES_IGNORE));
}

static void run(int root)
{
    int next_seq[64], i, j, total = (size - 1) * M;
    int(*bufs)[MAXLEN] = test_malloc(sizeof(int[MAXLEN]) * (size_t)(total > 0 ? total : 1));
    MPI_Request *reqs = test_malloc(sizeof(MPI_Request) * (size_t)(total > 0 ? total : 1));
    MPI_Status *stats = test_malloc(sizeof(MPI_Status) * (size_t)(total > 0 ? total : 1));
    MPI_Status st;

    /* A: pre-posted wildcard receives */
    if (rank == root) {
        for (j = 0; j < total; j++)
            CHECK_MPI(MPI_Irecv(bufs[j], MAXLEN, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG,
                                MPI_COMM_WORLD, &reqs[j]));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == root) {
        CHECK_MPI(MPI_Waitall(total, reqs, stats));
        memset(next_seq, 0, sizeof next_seq);
        for (j = 0; j < total; j++)
            check_msg("A (pre-posted Irecv ANY_SOURCE/ANY_TAG)", bufs[j], &stats[j], next_seq, -1);
    } else {
        send_all(root, 0);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* B: blocking ANY_SOURCE/ANY_TAG while messages stream in */
    if (rank == root) {
        memset(next_seq, 0, sizeof next_seq);
        for (j = 0; j < total; j++) {
            CHECK_MPI(MPI_Recv(bufs[0], MAXLEN, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG,
                               MPI_COMM_WORLD, &st));
            check_msg("B (Recv ANY_SOURCE/ANY_TAG)", bufs[0], &st, next_seq, -1);
        }
    } else {
        send_all(root, 0);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* C: ANY_SOURCE with a fixed tag: all tag-2 messages first, then all tag-1 messages */
    if (rank == root) {
        int tag;
        for (tag = 2; tag >= 1; tag--) {
            /* tag 2 carries the odd sequence numbers, tag 1 the even ones */
            for (i = 0; i < 64; i++)
                next_seq[i] = tag == 2 ? 1 : 0;
            for (j = 0; j < total / 2; j++) {
                CHECK_MPI(MPI_Recv(bufs[0], MAXLEN, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD,
                                   &st));
                check_msg("C (Recv ANY_SOURCE, fixed tag)", bufs[0], &st, next_seq, tag);
                next_seq[st.MPI_SOURCE]++; /* skip the other tag's sequence numbers */
            }
            for (i = 0; i < size; i++)
                CHECK(i == rank || next_seq[i] == M + (tag == 2),
                      "C: tag %d: sender %d delivered up to seq %d", tag, i, next_seq[i]);
        }
    } else {
        send_all(root, 1);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* D: fixed source, ANY_TAG, senders in reverse order */
    if (rank == root) {
        memset(next_seq, 0, sizeof next_seq);
        for (i = size - 1; i >= 0; i--) {
            if (i == rank)
                continue;
            for (j = 0; j < M; j++) {
                CHECK_MPI(MPI_Recv(bufs[0], MAXLEN, MPI_INT, i, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
                CHECK(st.MPI_SOURCE == i, "D: asked for source %d, status says %d", i, st.MPI_SOURCE);
                check_msg("D (Recv fixed source, ANY_TAG)", bufs[0], &st, next_seq, -1);
            }
        }
    } else {
        send_all(root, 0);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    free(bufs);
    free(reqs);
    free(stats);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("wildcard");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size <= 64, "at most 64 ranks supported, got %d", size);
    run(0);
    if (size > 1)
        run(size - 1);
    return test_end();
}
