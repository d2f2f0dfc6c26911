/*
 * allpairs.c - every ordered pair of ranks (including a rank with itself) exchanges messages of
 * every size class, from 0 B to 8 MiB.
 *
 * The sizes cover the eager path, the usual eager-limit boundaries (4, 8, 16, 32, 64 KiB, each
 * -1/exact/+1) and the rendezvous path.  Each message holds a deterministic pattern derived from
 * (source, destination, size, sequence number); the receiver regenerates the pattern and compares
 * every byte, checks the status (source, tag, count) and checks that the 16 guard bytes after the
 * receive buffer were not touched.  The exchanges are done four ways:
 *   1. blocking MPI_Sendrecv, one size after the other;
 *   2. all sizes in flight at once (tag = size index), every MPI_Irecv posted before the Isends;
 *   3. all sizes at once, the Isends first (increasing size), then the Irecvs (decreasing size);
 *   4. all sizes at once, Isend of size k interleaved with Irecv of size n-1-k;
 * each of 2..4 completed by one MPI_Waitall.
 * In step s every rank sends to rank + s and receives from rank - s, so no step can deadlock.
 *
 * usage: allpairs [max_bytes]   (default 8 MiB)
 */
#include "stormtest.h"

#define GUARD 16
#define GUARD_BYTE 0xEE

static const long all_sizes[] = {
    0, 1, 7, 8, 64, 1000, 4095, 4096, 4097, 8191, 8192, 8193, 12288, 16383, 16384, 16385,
    32767, 32768, 32769, 65535, 65536, 65537, 131072, 262145, 1048576, 8388608,
};
#define NSIZES ((int)(sizeof all_sizes / sizeof all_sizes[0]))

static int rank, size, nsizes;
static long sizes[NSIZES];
static unsigned char *sbuf[NSIZES], *rbuf[NSIZES];

static void prepare_recv(int k)
{
    memset(rbuf[k], GUARD_BYTE, (size_t)sizes[k] + GUARD);
}

static void verify(int k, int src, int seq, int tag, const MPI_Status *st, const char *how)
{
    size_t len = (size_t)sizes[k];
    int count = -1, g;
    long off;
    uint64_t key = test_key(src, rank, len, seq);

    CHECK(st->MPI_SOURCE == src && st->MPI_TAG == tag,
          "%s: %zu B from %d: status source %d tag %d, expected tag %d", how, len, src,
          st->MPI_SOURCE, st->MPI_TAG, tag);
    CHECK_MPI(MPI_Get_count(st, MPI_BYTE, &count));
    CHECK(count == (int)len, "%s: %zu B from %d: Get_count says %d", how, len, src, count);
    off = pattern_check(rbuf[k], len, key);
    CHECK(off < 0, "%s: %zu B from %d (seq %d): byte %ld is 0x%02x, expected 0x%02x", how, len,
          src, seq, off, rbuf[k][off], pattern_byte(key, (size_t)off));
    for (g = 0; g < GUARD; g++)
        CHECK(rbuf[k][len + g] == GUARD_BYTE, "%s: %zu B from %d: guard byte %d overwritten (0x%02x)",
              how, len, src, g, rbuf[k][len + g]);
}

int main(int argc, char **argv)
{
    long max_bytes = 8388608;
    int s, k, mode;
    MPI_Request reqs[2 * NSIZES];
    MPI_Status stats[2 * NSIZES];

    MPI_Init(&argc, &argv);
    test_begin("allpairs");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1) {
        max_bytes = strtol(argv[1], NULL, 0);
        CHECK(max_bytes >= 0, "bad max_bytes argument '%s'", argv[1]);
    }

    nsizes = 0;
    for (k = 0; k < NSIZES; k++)
        if (all_sizes[k] <= max_bytes)
            sizes[nsizes++] = all_sizes[k];
    for (k = 0; k < nsizes; k++) {
        sbuf[k] = test_malloc((size_t)sizes[k]);
        rbuf[k] = test_malloc((size_t)sizes[k] + GUARD);
    }

    for (s = 0; s < size; s++) {
        int dst = (rank + s) % size, src = (rank - s + size) % size;

        /* 1. blocking Sendrecv, one size at a time */
        for (k = 0; k < nsizes; k++) {
            int seq = 1000 + k;
            pattern_fill(sbuf[k], (size_t)sizes[k], test_key(rank, dst, (size_t)sizes[k], seq));
            prepare_recv(k);
            CHECK_MPI(MPI_Sendrecv(sbuf[k], (int)sizes[k], MPI_BYTE, dst, k, rbuf[k],
                                   (int)sizes[k], MPI_BYTE, src, k, MPI_COMM_WORLD, &stats[0]));
            verify(k, src, seq, k, &stats[0], "Sendrecv");
        }

        /* 2..4: all sizes in flight at once, posted in different orders */
        for (mode = 2; mode <= 4; mode++) {
            const char *how = mode == 2 ? "Irecvs-then-Isends"
                            : mode == 3 ? "Isends-then-Irecvs(reversed)" : "interleaved";
            int nreq = 0;
            for (k = 0; k < nsizes; k++) {
                pattern_fill(sbuf[k], (size_t)sizes[k],
                             test_key(rank, dst, (size_t)sizes[k], mode * 1000 + k));
                prepare_recv(k);
            }
            /* reqs[0..nsizes) are receives (index = size index), reqs[nsizes..) sends */
            if (mode == 2) {
                for (k = 0; k < nsizes; k++)
                    CHECK_MPI(MPI_Irecv(rbuf[k], (int)sizes[k], MPI_BYTE, src, k, MPI_COMM_WORLD,
                                        &reqs[k]));
                for (k = 0; k < nsizes; k++)
                    CHECK_MPI(MPI_Isend(sbuf[k], (int)sizes[k], MPI_BYTE, dst, k, MPI_COMM_WORLD,
                                        &reqs[nsizes + k]));
            } else if (mode == 3) {
                for (k = 0; k < nsizes; k++)
                    CHECK_MPI(MPI_Isend(sbuf[k], (int)sizes[k], MPI_BYTE, dst, k, MPI_COMM_WORLD,
                                        &reqs[nsizes + k]));
                for (k = nsizes - 1; k >= 0; k--)
                    CHECK_MPI(MPI_Irecv(rbuf[k], (int)sizes[k], MPI_BYTE, src, k, MPI_COMM_WORLD,
                                        &reqs[k]));
            } else {
                for (k = 0; k < nsizes; k++) {
                    int r = nsizes - 1 - k;
                    CHECK_MPI(MPI_Isend(sbuf[k], (int)sizes[k], MPI_BYTE, dst, k, MPI_COMM_WORLD,
                                        &reqs[nsizes + k]));
                    CHECK_MPI(MPI_Irecv(rbuf[r], (int)sizes[r], MPI_BYTE, src, r, MPI_COMM_WORLD,
                                        &reqs[r]));
                }
            }
            nreq = 2 * nsizes;
            CHECK_MPI(MPI_Waitall(nreq, reqs, stats));
            for (k = 0; k < nsizes; k++)
                verify(k, src, mode * 1000 + k, k, &stats[k], how);
        }
    }

    for (k = 0; k < nsizes; k++) {
        free(sbuf[k]);
        free(rbuf[k]);
    }
    return test_end();
}
