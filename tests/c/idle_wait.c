/*
 * idle_wait.c - waits that go idle still see every message: rounds of ping-pong between rank
 * pairs (small and 64 KiB), a token around the ring, an allreduce whose value is checked, and a
 * polled non-blocking barrier, with late senders (a rank sleeps before it sends, so its
 * peer's wait goes idle, spins its rounds and then yields or sleeps).
 *
 * Run with stormrun's `--mca mpi_idle_sleep 1` (and oversubscribed) to force the sleeping
 * idle path: a wakeup lost there hangs the job, which the launcher's timeout catches.
 * args: [rounds] (default 2000)
 */
#include "stormtest.h"

#define BIG 8192 /* long longs: 64 KiB */

int main(int argc, char **argv)
{
    int rank, size, round, rounds = 2000;
    long long *big;

    MPI_Init(&argc, &argv);
    test_begin("idle_wait");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1)
        rounds = atoi(argv[1]);
    CHECK(rounds > 0, "bad round count %s", argv[1]);
    big = malloc(BIG * sizeof *big);
    CHECK(big != NULL, "out of memory");
    int partner = rank ^ 1;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;

    for (round = 0; round < rounds; round++) {
        long long v = (long long)rank * 1000003 + round, got = -1, sum = -1;
        MPI_Status st;

        /* Every 50th round, a sender comes late: its peers' waits go fully idle. */
        if (round % 50 == 7 && rank == round % size)
            test_sleep_ms(2);

        /* Ping-pong between pairs (an odd rank out talks to itself). */
        if (partner < size) {
            if (rank < partner) {
                CHECK_MPI(MPI_Send(&v, 1, MPI_LONG_LONG, partner, round, MPI_COMM_WORLD));
                CHECK_MPI(MPI_Recv(&got, 1, MPI_LONG_LONG, partner, round, MPI_COMM_WORLD, &st));
            } else {
                CHECK_MPI(MPI_Recv(&got, 1, MPI_LONG_LONG, partner, round, MPI_COMM_WORLD, &st));
                CHECK_MPI(MPI_Send(&v, 1, MPI_LONG_LONG, partner, round, MPI_COMM_WORLD));
            }
            CHECK(got == (long long)partner * 1000003 + round,
                  "round %d: got %lld from %d, expected %lld", round, got, partner,
                  (long long)partner * 1000003 + round);
        }

        /* A 64 KiB exchange around the ring every 10th round (the rendezvous path). */
        if (round % 10 == 0 && size > 1) {
            long long i;
            for (i = 0; i < BIG; i++)
                big[i] = i * 7 + rank + round;
            CHECK_MPI(MPI_Sendrecv_replace(big, BIG, MPI_LONG_LONG, right, round, left, round,
                                           MPI_COMM_WORLD, &st));
            for (i = 0; i < BIG; i++)
                CHECK(big[i] == i * 7 + left + round, "round %d: ring word %lld is %lld", round,
                      i, big[i]);
        }

        CHECK_MPI(MPI_Allreduce(&v, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
        long long expect = (long long)size * (size - 1) / 2 * 1000003 + (long long)size * round;
        CHECK(sum == expect, "round %d: allreduce gave %lld, expected %lld", round, sum, expect);

        /* A barrier completed by Test polling every 20th round. */
        if (round % 20 == 3) {
            MPI_Request req;
            int done = 0;
            CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &req));
            while (!done)
                CHECK_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        }
    }
    free(big);
    return test_end();
}
