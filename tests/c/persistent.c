/*
 * persistent.c - persistent requests (MPI_Send_init / MPI_Recv_init) reused many times.
 *
 * Every rank sends to its right neighbour and receives from its left one, over three channels at
 * once: 1 int, 1000 ints and 64K ints (256 KiB, past any eager limit), plus a receive set up with
 * MPI_ANY_SOURCE.  The requests are created once and then, for 60 iterations, the send buffers are
 * refilled with iteration-dependent values and the requests are started (alternately with
 * MPI_Startall and one MPI_Start each) and completed (MPI_Waitall, or MPI_Wait each).  After
 * completion a persistent request must stay allocated (not MPI_REQUEST_NULL).  Also checked:
 * MPI_Wait/MPI_Test on an inactive persistent request return at once with an empty status
 * (source MPI_ANY_SOURCE, tag MPI_ANY_TAG, count 0), and MPI_Request_free of inactive requests
 * (including one that was never started) sets them to MPI_REQUEST_NULL.
 */
#include "stormtest.h"

#define ITERS 60
#define NCH 3

static const int counts[NCH] = {1, 1000, 65536};

static int value(int src, int ch, int iter, int i) { return src * 1000003 + ch * 100003 + iter * 1009 + i; }

static void check_empty(const MPI_Status *st, const char *what)
{
    int count = -1;
    CHECK(st->MPI_SOURCE == MPI_ANY_SOURCE && st->MPI_TAG == MPI_ANY_TAG,
          "%s on an inactive persistent request: status source %d tag %d, expected empty status",
          what, st->MPI_SOURCE, st->MPI_TAG);
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &count));
    CHECK(count == 0, "%s on an inactive persistent request: count %d", what, count);
}

int main(int argc, char **argv)
{
    int rank, size, right, left, ch, iter, i, flag, count;
    int *sbuf[NCH + 1], *rbuf[NCH + 1];
    MPI_Request reqs[2 * (NCH + 1)], unused;
    MPI_Status stats[2 * (NCH + 1)], st;
    const int nreq = 2 * (NCH + 1);

    MPI_Init(&argc, &argv);
    test_begin("persistent");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;

    /* channels 0..NCH-1: fixed source; channel NCH: 10 ints received with MPI_ANY_SOURCE */
    for (ch = 0; ch <= NCH; ch++) {
        int n = ch < NCH ? counts[ch] : 10;
        sbuf[ch] = test_malloc(sizeof(int) * (size_t)n);
        rbuf[ch] = test_malloc(sizeof(int) * (size_t)n);
        /* receive requests in reqs[0..NCH], send requests in reqs[NCH+1..] */
        CHECK_MPI(MPI_Recv_init(rbuf[ch], n, MPI_INT, ch < NCH ? left : MPI_ANY_SOURCE, 50 + ch,
                                MPI_COMM_WORLD, &reqs[ch]));
        CHECK_MPI(MPI_Send_init(sbuf[ch], n, MPI_INT, right, 50 + ch, MPI_COMM_WORLD,
                                &reqs[NCH + 1 + ch]));
        CHECK(reqs[ch] != MPI_REQUEST_NULL && reqs[NCH + 1 + ch] != MPI_REQUEST_NULL,
              "Recv_init/Send_init returned MPI_REQUEST_NULL");
    }

    /* inactive (never started) persistent requests: Wait and Test return an empty status */
    CHECK_MPI(MPI_Wait(&reqs[0], &st));
    check_empty(&st, "MPI_Wait");
    CHECK(reqs[0] != MPI_REQUEST_NULL, "MPI_Wait freed an inactive persistent request");
    flag = 0;
    CHECK_MPI(MPI_Test(&reqs[NCH + 1], &flag, &st));
    CHECK(flag, "MPI_Test on an inactive persistent request returned flag = false");
    check_empty(&st, "MPI_Test");

    /* a persistent request that is never started, freed while inactive */
    CHECK_MPI(MPI_Send_init(sbuf[0], 1, MPI_INT, right, 99, MPI_COMM_WORLD, &unused));
    CHECK_MPI(MPI_Request_free(&unused));
    CHECK(unused == MPI_REQUEST_NULL, "Request_free did not set the handle to MPI_REQUEST_NULL");

    for (iter = 0; iter < ITERS; iter++) {
        for (ch = 0; ch <= NCH; ch++) {
            int n = ch < NCH ? counts[ch] : 10;
            for (i = 0; i < n; i++) {
                sbuf[ch][i] = value(rank, ch, iter, i);
                rbuf[ch][i] = -1;
            }
        }
        if (iter % 2 == 0) {
            CHECK_MPI(MPI_Startall(nreq, reqs));
            CHECK_MPI(MPI_Waitall(nreq, reqs, stats));
        } else {
            /* receives started one by one, sends in reverse order; completed one at a time */
            for (ch = 0; ch <= NCH; ch++)
                CHECK_MPI(MPI_Start(&reqs[ch]));
            for (ch = NCH; ch >= 0; ch--)
                CHECK_MPI(MPI_Start(&reqs[NCH + 1 + ch]));
            for (i = nreq - 1; i >= 0; i--)
                CHECK_MPI(MPI_Wait(&reqs[i], &stats[i]));
        }
        for (i = 0; i < nreq; i++)
            CHECK(reqs[i] != MPI_REQUEST_NULL,
                  "iteration %d: persistent request %d became MPI_REQUEST_NULL on completion", iter, i);
        for (ch = 0; ch <= NCH; ch++) {
            int n = ch < NCH ? counts[ch] : 10;
            CHECK(stats[ch].MPI_SOURCE == left && stats[ch].MPI_TAG == 50 + ch,
                  "iteration %d channel %d: status source %d tag %d", iter, ch,
                  stats[ch].MPI_SOURCE, stats[ch].MPI_TAG);
            CHECK_MPI(MPI_Get_count(&stats[ch], MPI_INT, &count));
            CHECK(count == n, "iteration %d channel %d: count %d, expected %d", iter, ch, count, n);
            for (i = 0; i < n; i++)
                CHECK(rbuf[ch][i] == value(left, ch, iter, i),
                      "iteration %d channel %d: element %d is %d, expected %d", iter, ch, i,
                      rbuf[ch][i], value(left, ch, iter, i));
        }
    }

    /* all inactive again: Waitall returns at once with empty statuses, then free them */
    CHECK_MPI(MPI_Waitall(nreq, reqs, stats));
    for (i = 0; i < nreq; i++) {
        check_empty(&stats[i], "MPI_Waitall");
        CHECK_MPI(MPI_Request_free(&reqs[i]));
        CHECK(reqs[i] == MPI_REQUEST_NULL, "Request_free left request %d non-null", i);
    }
    for (ch = 0; ch <= NCH; ch++) {
        free(sbuf[ch]);
        free(rbuf[ch]);
    }
    return test_end();
}
