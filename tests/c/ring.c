/*
 * ring.c - a token travels around the ring of all ranks several times.
 *
 * Lap l: rank 0 sends the token to rank 1, each rank adds (rank + 1) * (l + 1) and passes it on,
 * rank 0 receives it back and adds its own share.  Every rank checks the value it receives
 * against the value computed locally, and the status (source, tag, count).  A second ring runs
 * the other way with a 64 KiB token so the large-message path is used too.
 */
#include "stormtest.h"

#define LAPS 10
#define BIG 8192 /* long longs: 64 KiB */

/* Sum of (q + 1) * (lap + 1) over q < upto. */
static long long share(int upto, int lap)
{
    return (long long)upto * (upto + 1) / 2 * (lap + 1);
}

int main(int argc, char **argv)
{
    int rank, size, lap, count;
    long long token, total_before = 0, expect;
    long long *big;
    MPI_Status st;

    MPI_Init(&argc, &argv);
    test_begin("ring");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;

    for (lap = 0; lap < LAPS; lap++) {
        int tag = 100 + lap;
        if (size == 1) {
            token = total_before + share(1, lap);
            CHECK_MPI(MPI_Sendrecv_replace(&token, 1, MPI_LONG_LONG, 0, tag, 0, tag,
                                           MPI_COMM_WORLD, &st));
        } else if (rank == 0) {
            token = total_before + share(1, lap);
            CHECK_MPI(MPI_Send(&token, 1, MPI_LONG_LONG, right, tag, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Recv(&token, 1, MPI_LONG_LONG, left, tag, MPI_COMM_WORLD, &st));
        } else {
            CHECK_MPI(MPI_Recv(&token, 1, MPI_LONG_LONG, left, tag, MPI_COMM_WORLD, &st));
            expect = total_before + share(rank, lap);
            CHECK(token == expect, "lap %d: received token %lld, expected %lld", lap, token, expect);
            token += (long long)(rank + 1) * (lap + 1);
            CHECK_MPI(MPI_Send(&token, 1, MPI_LONG_LONG, right, tag, MPI_COMM_WORLD));
        }
        CHECK(st.MPI_SOURCE == left && st.MPI_TAG == tag,
              "lap %d: status source %d tag %d, expected %d/%d", lap, st.MPI_SOURCE, st.MPI_TAG,
              left, tag);
        CHECK_MPI(MPI_Get_count(&st, MPI_LONG_LONG, &count));
        CHECK(count == 1, "lap %d: count %d", lap, count);
        total_before += share(size, lap);
        if (rank == 0)
            CHECK(token == total_before, "lap %d: token back at rank 0 is %lld, expected %lld", lap,
                  token, total_before);
    }

    /* Reverse ring with a large token: each rank adds its rank to every element. */
    big = test_malloc(BIG * sizeof *big);
    for (lap = 0; lap < 3; lap++) {
        int tag = 500 + lap, i;
        long long base = (long long)lap * 1000000;
        /* value of element i when it arrives at rank r (travelling 0 -> size-1 -> ... -> 1) */
        if (rank == 0) {
            for (i = 0; i < BIG; i++)
                big[i] = base + i;
            if (size > 1) {
                CHECK_MPI(MPI_Send(big, BIG, MPI_LONG_LONG, left, tag, MPI_COMM_WORLD));
                CHECK_MPI(MPI_Recv(big, BIG, MPI_LONG_LONG, right, tag, MPI_COMM_WORLD, &st));
            }
            for (i = 0; i < BIG; i++)
                CHECK(big[i] == base + i + (long long)size * (size - 1) / 2,
                      "reverse lap %d: element %d is %lld at the end", lap, i, big[i]);
        } else {
            CHECK_MPI(MPI_Recv(big, BIG, MPI_LONG_LONG, right, tag, MPI_COMM_WORLD, &st));
            CHECK_MPI(MPI_Get_count(&st, MPI_LONG_LONG, &count));
            CHECK(count == BIG && st.MPI_SOURCE == right, "reverse lap %d: count %d source %d", lap,
                  count, st.MPI_SOURCE);
            /* ranks size-1 .. rank+1 have added their ranks already */
            long long added = (long long)size * (size - 1) / 2 - (long long)rank * (rank + 1) / 2;
            for (i = 0; i < BIG; i++) {
                CHECK(big[i] == base + i + added, "reverse lap %d: element %d = %lld, expected %lld",
                      lap, i, big[i], base + i + added);
                big[i] += rank;
            }
            CHECK_MPI(MPI_Send(big, BIG, MPI_LONG_LONG, left, tag, MPI_COMM_WORLD));
        }
    }
    free(big);
    return test_end();
}
