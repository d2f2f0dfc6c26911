/*
 * many_requests.c - thousands of outstanding nonblocking requests between pairs of ranks.
 *
 * Every rank exchanges N (default 4000) messages with its right and left neighbours at once:
 *   1. pre-posted: N MPI_Irecv posted (in reverse tag order), a barrier, then N MPI_Isend, one
 *      MPI_Waitall over all 2N requests;
 *   2. unexpected: N MPI_Isend first, a barrier (so the messages pile up at the receiver before
 *      any receive exists), then N MPI_Irecv, MPI_Waitall;
 *   3. drained with MPI_Waitsome in chunks instead of one Waitall.
 * Mostly 1-int messages; every 97th is 16 KiB and every 1000th 256 KiB, so rendezvous transfers
 * are mixed into the flood.  Every receive is checked (tag, count, content).
 *
 * usage: many_requests [N]
 */
#include "stormtest.h"

static int rank, size, left, right, n;

static int msg_len(int i) /* in ints */
{
    if (i % 1000 == 999)
        return 65536;
    if (i % 97 == 96)
        return 4096;
    return 1;
}

static int val(int src, int phase, int i, int j) { return src * 7919 + phase * 1000003 + i * 31 + j; }

static void run(int phase)
{
    int **sbuf = test_malloc(sizeof(int *) * (size_t)n);
    int **rbuf = test_malloc(sizeof(int *) * (size_t)n);
    MPI_Request *reqs = test_malloc(sizeof(MPI_Request) * 2 * (size_t)n);
    MPI_Status *stats = test_malloc(sizeof(MPI_Status) * 2 * (size_t)n);
    int *indices = test_malloc(sizeof(int) * 2 * (size_t)n);
    int i, j, count;

    for (i = 0; i < n; i++) {
        int len = msg_len(i);
        sbuf[i] = test_malloc(sizeof(int) * (size_t)len);
        rbuf[i] = test_malloc(sizeof(int) * (size_t)len);
        for (j = 0; j < len; j++) {
            sbuf[i][j] = val(rank, phase, i, j);
            rbuf[i][j] = -1;
        }
    }
    /* reqs[0..n): receives (index = tag), reqs[n..2n): sends */
    if (phase != 2) {
        for (i = n - 1; i >= 0; i--)
            CHECK_MPI(MPI_Irecv(rbuf[i], msg_len(i), MPI_INT, left, i, MPI_COMM_WORLD, &reqs[i]));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (i = 0; i < n; i++)
            CHECK_MPI(MPI_Isend(sbuf[i], msg_len(i), MPI_INT, right, i, MPI_COMM_WORLD, &reqs[n + i]));
    } else {
        for (i = 0; i < n; i++)
            CHECK_MPI(MPI_Isend(sbuf[i], msg_len(i), MPI_INT, right, i, MPI_COMM_WORLD, &reqs[n + i]));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (i = 0; i < n; i++)
            CHECK_MPI(MPI_Irecv(rbuf[i], msg_len(i), MPI_INT, left, i, MPI_COMM_WORLD, &reqs[i]));
    }
    if (phase != 3) {
        CHECK_MPI(MPI_Waitall(2 * n, reqs, stats));
    } else {
        int done = 0, outcount;
        MPI_Status *chunk = test_malloc(sizeof(MPI_Status) * 2 * (size_t)n);
        while (done < 2 * n) {
            CHECK_MPI(MPI_Waitsome(2 * n, reqs, &outcount, indices, chunk));
            CHECK(outcount >= 1 && outcount <= 2 * n - done, "Waitsome outcount %d with %d left",
                  outcount, 2 * n - done);
            for (j = 0; j < outcount; j++) {
                CHECK(reqs[indices[j]] == MPI_REQUEST_NULL, "Waitsome index %d not freed", indices[j]);
                stats[indices[j]] = chunk[j];
            }
            done += outcount;
        }
        free(chunk);
    }
    for (i = 0; i < n; i++) {
        int len = msg_len(i);
        CHECK(stats[i].MPI_SOURCE == left && stats[i].MPI_TAG == i,
              "phase %d: receive %d: status source %d tag %d", phase, i, stats[i].MPI_SOURCE,
              stats[i].MPI_TAG);
        CHECK_MPI(MPI_Get_count(&stats[i], MPI_INT, &count));
        CHECK(count == len, "phase %d: receive %d: count %d, expected %d", phase, i, count, len);
        for (j = 0; j < len; j++)
            CHECK(rbuf[i][j] == val(left, phase, i, j), "phase %d: message %d element %d is %d, "
                  "expected %d", phase, i, j, rbuf[i][j], val(left, phase, i, j));
        free(sbuf[i]);
        free(rbuf[i]);
    }
    free(sbuf);
    free(rbuf);
    free(reqs);
    free(stats);
    free(indices);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("many_requests");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    n = argc > 1 ? atoi(argv[1]) : 4000;
    CHECK(n > 0, "bad N");
    run(1);
    run(2);
    run(3);
    return test_end();
}
