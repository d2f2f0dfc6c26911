/*
 * rsend.c - ready-mode sends (MPI_Rsend, MPI_Irsend).
 *
 * A ready send is only correct if the matching receive is already posted, so every rank first
 * posts its receives (from its left neighbour), then tells the left neighbour "ready" with a
 * small message on another tag; a rank sends in ready mode to its right neighbour only after the
 * right neighbour's "ready" arrived.  Sizes 0 B, 8 B, 4 KiB, 64 KiB + 1 and 1 MiB; several
 * receives with different tags are posted at once and the ready sends go out in the reverse
 * tag order, alternating MPI_Rsend and MPI_Irsend.  Content, source, tag and count are checked.
 */
#include "stormtest.h"

#define TAG_READY 100
static const int sizes[] = {0, 8, 4096, 65537, 1 << 20};
#define N 5

int main(int argc, char **argv)
{
    int rank, size, left, right, round, k, count, ready = 1, got = 0;
    unsigned char *sbuf[N], *rbuf[N];
    MPI_Request rreq[N], sreq[N], readyreq;
    MPI_Status st[N];

    MPI_Init(&argc, &argv);
    test_begin("rsend");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    for (k = 0; k < N; k++) {
        sbuf[k] = test_malloc((size_t)sizes[k]);
        rbuf[k] = test_malloc((size_t)sizes[k]);
    }

    for (round = 0; round < 4; round++) {
        for (k = 0; k < N; k++) {
            memset(rbuf[k], 0, (size_t)sizes[k]);
            CHECK_MPI(MPI_Irecv(rbuf[k], sizes[k], MPI_BYTE, left, k, MPI_COMM_WORLD, &rreq[k]));
            pattern_fill(sbuf[k], (size_t)sizes[k],
                         test_key(rank, right, (size_t)sizes[k], round * N + k));
        }
        /* tell the left neighbour that our receives are posted, wait for the right one's */
        CHECK_MPI(MPI_Isend(&ready, 1, MPI_INT, left, TAG_READY, MPI_COMM_WORLD, &readyreq));
        CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, right, TAG_READY, MPI_COMM_WORLD, &st[0]));
        for (k = N - 1; k >= 0; k--) {
            if ((k + round) % 2 == 0) {
                CHECK_MPI(MPI_Rsend(sbuf[k], sizes[k], MPI_BYTE, right, k, MPI_COMM_WORLD));
                sreq[k] = MPI_REQUEST_NULL;
            } else {
                CHECK_MPI(MPI_Irsend(sbuf[k], sizes[k], MPI_BYTE, right, k, MPI_COMM_WORLD, &sreq[k]));
            }
        }
        CHECK_MPI(MPI_Waitall(N, rreq, st));
        for (k = 0; k < N; k++) {
            long off;
            CHECK_MPI(MPI_Get_count(&st[k], MPI_BYTE, &count));
            CHECK(count == sizes[k] && st[k].MPI_SOURCE == left && st[k].MPI_TAG == k,
                  "round %d: message %d: count %d source %d tag %d", round, k, count,
                  st[k].MPI_SOURCE, st[k].MPI_TAG);
            off = pattern_check(rbuf[k], (size_t)count,
                                test_key(left, rank, (size_t)count, round * N + k));
            CHECK(off < 0, "round %d: %d-byte ready-mode message wrong at byte %ld", round, count, off);
        }
        CHECK_MPI(MPI_Waitall(N, sreq, MPI_STATUSES_IGNORE));
        CHECK_MPI(MPI_Wait(&readyreq, MPI_STATUS_IGNORE));
    }
    for (k = 0; k < N; k++) {
        free(sbuf[k]);
        free(rbuf[k]);
    }
    return test_end();
}
