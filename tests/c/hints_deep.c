/*
 * Issue 18: deep matching queues on communicators whose info assertions rule out wildcards
 * (mpi_assert_no_any_source + mpi_assert_no_any_tag, which stormpi matches through a hash table
 * by exact envelope). Around a ring, each rank sends DEPTH messages of distinct tags to the next
 * and receives DEPTH from the previous: receives posted first (messages in reverse tag order)
 * and messages sent first (receives posted in reverse tag order), sizes mixed so some go by
 * rendezvous; several messages of one tag keep their order; the hints switched on and off with
 * receives and messages queued lose and misorder nothing; with overtaking allowed too, many
 * messages with repeating tags all arrive, each exactly once. Every payload is checked.
 */
#include "stormtest.h"

#include <stdlib.h>
#include <string.h>

#define DEPTH 600
#define BIG 20000 /* ints in every 97th message: past any eager limit */

static int rank, size, next, prev;

static int count_of(int tag)
{
    return tag % 97 == 0 ? BIG : 1 + tag % 5;
}

static int value(int src, int tag, int round, int i)
{
    return src * 1000003 + tag * 1009 + round * 7 + i;
}

static MPI_Comm with_hints(int overtaking)
{
    MPI_Info info;
    MPI_Comm c;
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "mpi_assert_no_any_source", "true"));
    CHECK_MPI(MPI_Info_set(info, "mpi_assert_no_any_tag", "true"));
    if (overtaking)
        CHECK_MPI(MPI_Info_set(info, "mpi_assert_allow_overtaking", "true"));
    CHECK_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c));
    CHECK_MPI(MPI_Info_free(&info));
    return c;
}

static void set_no_wildcards(MPI_Comm c, const char *v)
{
    MPI_Info info;
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "mpi_assert_no_any_source", v));
    CHECK_MPI(MPI_Info_set(info, "mpi_assert_no_any_tag", v));
    CHECK_MPI(MPI_Comm_set_info(c, info));
    CHECK_MPI(MPI_Info_free(&info));
}

struct bufs {
    int *send[DEPTH], *recv[DEPTH];
    MPI_Request sreq[DEPTH], rreq[DEPTH];
};

static void fill(struct bufs *b, int round)
{
    for (int t = 0; t < DEPTH; t++) {
        for (int i = 0; i < count_of(t); i++) {
            b->send[t][i] = value(rank, t, round, i);
            b->recv[t][i] = -1;
        }
    }
}

static void post_recvs(struct bufs *b, MPI_Comm c, int reverse)
{
    for (int k = 0; k < DEPTH; k++) {
        int t = reverse ? DEPTH - 1 - k : k;
        CHECK_MPI(MPI_Irecv(b->recv[t], count_of(t), MPI_INT, prev, t, c, &b->rreq[t]));
    }
}

static void post_sends(struct bufs *b, MPI_Comm c, int reverse)
{
    for (int k = 0; k < DEPTH; k++) {
        int t = reverse ? DEPTH - 1 - k : k;
        CHECK_MPI(MPI_Isend(b->send[t], count_of(t), MPI_INT, next, t, c, &b->sreq[t]));
    }
}

static void finish(struct bufs *b, int round, const char *what)
{
    MPI_Status st[DEPTH];
    CHECK_MPI(MPI_Waitall(DEPTH, b->rreq, st));
    CHECK_MPI(MPI_Waitall(DEPTH, b->sreq, MPI_STATUSES_IGNORE));
    for (int t = 0; t < DEPTH; t++) {
        int n = -1;
        CHECK(st[t].MPI_SOURCE == prev && st[t].MPI_TAG == t, "%s: tag %d: status %d/%d", what,
              t, st[t].MPI_SOURCE, st[t].MPI_TAG);
        CHECK_MPI(MPI_Get_count(&st[t], MPI_INT, &n));
        CHECK(n == count_of(t), "%s: tag %d: count %d, want %d", what, t, n, count_of(t));
        for (int i = 0; i < count_of(t); i++)
            CHECK(b->recv[t][i] == value(prev, t, round, i), "%s: tag %d [%d] = %d, want %d",
                  what, t, i, b->recv[t][i], value(prev, t, round, i));
    }
}

/* Receives posted first, messages in reverse tag order; then messages first, receives posted
 * in reverse tag order. */
static void deep(struct bufs *b, MPI_Comm c, int round)
{
    fill(b, round);
    post_recvs(b, c, 0);
    CHECK_MPI(MPI_Barrier(c));
    post_sends(b, c, 1);
    finish(b, round, "posted first");

    fill(b, round + 1);
    post_sends(b, c, 0);
    CHECK_MPI(MPI_Barrier(c));
    post_recvs(b, c, 1);
    finish(b, round + 1, "unexpected first");
}

/* 50 messages of one tag, both ways round (posted first, sent first): matched in send order. */
static void one_tag_order(MPI_Comm c)
{
    int sv[50], rv[50];
    MPI_Request s[50], r[50];
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < 50; i++) {
            sv[i] = value(rank, 42, pass, i);
            rv[i] = -1;
        }
        if (pass == 0)
            for (int i = 0; i < 50; i++)
                CHECK_MPI(MPI_Irecv(&rv[i], 1, MPI_INT, prev, 42, c, &r[i]));
        CHECK_MPI(MPI_Barrier(c));
        for (int i = 0; i < 50; i++)
            CHECK_MPI(MPI_Isend(&sv[i], 1, MPI_INT, next, 42, c, &s[i]));
        CHECK_MPI(MPI_Barrier(c));
        if (pass == 1)
            for (int i = 0; i < 50; i++)
                CHECK_MPI(MPI_Irecv(&rv[i], 1, MPI_INT, prev, 42, c, &r[i]));
        CHECK_MPI(MPI_Waitall(50, r, MPI_STATUSES_IGNORE));
        CHECK_MPI(MPI_Waitall(50, s, MPI_STATUSES_IGNORE));
        for (int i = 0; i < 50; i++)
            CHECK(rv[i] == value(prev, 42, pass, i), "one tag, pass %d: [%d] = %d, want %d", pass,
                  i, rv[i], value(prev, 42, pass, i));
    }
}

/* The hints set, then cleared, while receives are posted and while messages are queued. */
static void hints_switched(struct bufs *b)
{
    MPI_Comm c;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    fill(b, 10);
    post_recvs(b, c, 0);
    set_no_wildcards(c, "true"); /* collective: every receive is posted before */
    post_sends(b, c, 1);
    finish(b, 10, "hints set with receives posted");

    fill(b, 11);
    post_sends(b, c, 0);
    CHECK_MPI(MPI_Barrier(c));
    set_no_wildcards(c, "false");
    post_recvs(b, c, 1);
    finish(b, 11, "hints cleared with messages queued");

    /* A wildcard is allowed again. */
    int x = value(rank, 1, 12, 0), y = -1;
    MPI_Status st;
    CHECK_MPI(MPI_Sendrecv(&x, 1, MPI_INT, next, 1, &y, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG,
                           c, &st));
    CHECK(y == value(prev, 1, 12, 0) && st.MPI_SOURCE == prev, "wildcard after clearing: %d", y);
    CHECK_MPI(MPI_Comm_free(&c));
}

/* Overtaking allowed: 2000 messages with 40 repeating tags, every one arrives exactly once. */
static void overtaking(MPI_Comm c)
{
    enum { N = 2000, TAGS = 40 };
    int *sv = malloc(N * sizeof(int)), *rv = malloc(N * sizeof(int));
    char *seen = calloc(N, 1);
    MPI_Request *s = malloc(N * sizeof(MPI_Request)), *r = malloc(N * sizeof(MPI_Request));
    CHECK(sv && rv && seen && s && r, "out of memory");
    for (int i = 0; i < N; i++) {
        sv[i] = i;
        rv[i] = -1;
    }
    for (int i = 0; i < N / 2; i++)
        CHECK_MPI(MPI_Irecv(&rv[i], 1, MPI_INT, prev, i % TAGS, c, &r[i]));
    for (int i = 0; i < N; i++)
        CHECK_MPI(MPI_Isend(&sv[i], 1, MPI_INT, next, i % TAGS, c, &s[i]));
    for (int i = N / 2; i < N; i++)
        CHECK_MPI(MPI_Irecv(&rv[i], 1, MPI_INT, prev, i % TAGS, c, &r[i]));
    CHECK_MPI(MPI_Waitall(N, r, MPI_STATUSES_IGNORE));
    CHECK_MPI(MPI_Waitall(N, s, MPI_STATUSES_IGNORE));
    for (int i = 0; i < N; i++) {
        CHECK(rv[i] >= 0 && rv[i] < N && rv[i] % TAGS == i % TAGS,
              "overtaking: receive %d got %d", i, rv[i]);
        CHECK(!seen[rv[i]], "overtaking: message %d twice", rv[i]);
        seen[rv[i]] = 1;
    }
    free(sv);
    free(rv);
    free(seen);
    free(s);
    free(r);
}

int main(int argc, char **argv)
{
    static struct bufs b;
    MPI_Comm c;
    MPI_Init(&argc, &argv);
    test_begin("hints_deep");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    next = (rank + 1) % size;
    prev = (rank + size - 1) % size;
    for (int t = 0; t < DEPTH; t++) {
        b.send[t] = malloc((size_t)count_of(t) * sizeof(int));
        b.recv[t] = malloc((size_t)count_of(t) * sizeof(int));
        CHECK(b.send[t] && b.recv[t], "out of memory");
    }

    c = with_hints(0);
    deep(&b, c, 0);
    deep(&b, c, 2);
    one_tag_order(c);
    CHECK_MPI(MPI_Comm_free(&c));

    hints_switched(&b);

    c = with_hints(1);
    deep(&b, c, 20);
    overtaking(c);
    CHECK_MPI(MPI_Comm_free(&c));

    for (int t = 0; t < DEPTH; t++) {
        free(b.send[t]);
        free(b.recv[t]);
    }
    return test_end();
}
