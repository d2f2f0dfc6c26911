/*
 * many_outstanding.c - 100,000 outstanding MPI_Isend/MPI_Irecv pairs per rank.
 *
 * Every rank posts N (default 100000) receives from its left neighbour, then N sends to its
 * right neighbour, and only then completes all 2N requests with one MPI_Waitall: 2N requests are
 * outstanding at once in every process (MPICH and Open MPI run this at their defaults). Messages
 * are two ints (sender, index); tags cycle through 0..32766, so receives of one tag match their
 * messages in order (non-overtaking). Every receive's status and payload is checked. A second
 * round does the same with the sends posted first (the receives find their messages waiting).
 *
 * usage: many_outstanding [N]
 */
#include "stormtest.h"

#define TAGS 32767

static int rank, size, left, right, n;

static void round_trip(int sends_first)
{
    int *sbuf = test_malloc(sizeof(int) * 2 * (size_t)n);
    int *rbuf = test_malloc(sizeof(int) * 2 * (size_t)n);
    MPI_Request *reqs = test_malloc(sizeof(MPI_Request) * 2 * (size_t)n);
    MPI_Status *stats = test_malloc(sizeof(MPI_Status) * 2 * (size_t)n);
    int i, count;

    for (i = 0; i < n; i++) {
        sbuf[2 * i] = rank;
        sbuf[2 * i + 1] = i ^ (sends_first << 30);
        rbuf[2 * i] = rbuf[2 * i + 1] = -1;
    }
    /* reqs[0..n): receives, reqs[n..2n): sends */
    if (sends_first) {
        for (i = 0; i < n; i++)
            CHECK_MPI(MPI_Isend(&sbuf[2 * i], 2, MPI_INT, right, i % TAGS, MPI_COMM_WORLD, &reqs[n + i]));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (i = 0; i < n; i++)
            CHECK_MPI(MPI_Irecv(&rbuf[2 * i], 2, MPI_INT, left, i % TAGS, MPI_COMM_WORLD, &reqs[i]));
    } else {
        for (i = 0; i < n; i++)
            CHECK_MPI(MPI_Irecv(&rbuf[2 * i], 2, MPI_INT, left, i % TAGS, MPI_COMM_WORLD, &reqs[i]));
        for (i = 0; i < n; i++)
            CHECK_MPI(MPI_Isend(&sbuf[2 * i], 2, MPI_INT, right, i % TAGS, MPI_COMM_WORLD, &reqs[n + i]));
    }
    for (i = 0; i < 2 * n; i++)
        CHECK(reqs[i] != MPI_REQUEST_NULL, "request %d is MPI_REQUEST_NULL before the wait", i);
    CHECK_MPI(MPI_Waitall(2 * n, reqs, stats));
    for (i = 0; i < n; i++) {
        CHECK(reqs[i] == MPI_REQUEST_NULL && reqs[n + i] == MPI_REQUEST_NULL,
              "request %d not freed by Waitall", i);
        CHECK(stats[i].MPI_SOURCE == left && stats[i].MPI_TAG == i % TAGS,
              "round %d: receive %d: status source %d tag %d, expected %d and %d", sends_first, i,
              stats[i].MPI_SOURCE, stats[i].MPI_TAG, left, i % TAGS);
        CHECK_MPI(MPI_Get_count(&stats[i], MPI_INT, &count));
        CHECK(count == 2, "round %d: receive %d: count %d", sends_first, i, count);
        CHECK(rbuf[2 * i] == left && rbuf[2 * i + 1] == (i ^ (sends_first << 30)),
              "round %d: receive %d holds (%d, %d), expected (%d, %d)", sends_first, i,
              rbuf[2 * i], rbuf[2 * i + 1], left, i ^ (sends_first << 30));
    }
    free(sbuf);
    free(rbuf);
    free(reqs);
    free(stats);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("many_outstanding");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    n = argc > 1 ? atoi(argv[1]) : 100000;
    CHECK(n > 0, "bad N");
    round_trip(0);
    round_trip(1);
    return test_end();
}
