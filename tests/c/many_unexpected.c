/*
 * many_unexpected.c - 1,000,000 unexpected 8-byte messages, then drained in order.
 *
 * Ranks pair up (0 with 1, 2 with 3, ...; an odd rank out only joins the barriers). The sender
 * of each pair sends N (default 1000000) messages of one 8-byte integer with MPI_Send, tags
 * cycling through 0..3, and then enters a barrier; the receiver enters the barrier first, so it
 * has posted no receive while all N messages arrive: every one is held as unexpected (MPICH and
 * Open MPI run this at their defaults). After the barrier the receiver takes them in order, with
 * the tag of the message it expects for even i and MPI_ANY_TAG for odd i: each receive must get
 * exactly message i (the earliest one waiting that matches), checked by value, tag, source and
 * count. Then the pair swaps roles with a shorter run, so both directions work.
 *
 * usage: many_unexpected [N]
 */
#include "stormtest.h"

static int64_t value(int src, int round, long i) { return ((int64_t)src << 40) ^ ((int64_t)round << 36) ^ (i * 2654435761LL); }

/* One round: `sender` sends n messages to `receiver` before the receiver posts anything. */
static void run(int rank, int sender, int receiver, long n, int round)
{
    long i;
    if (rank == sender) {
        for (i = 0; i < n; i++) {
            int64_t v = value(rank, round, i);
            CHECK_MPI(MPI_Send(&v, 1, MPI_INT64_T, receiver, (int)(i % 4), MPI_COMM_WORLD));
        }
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == receiver) {
        for (i = 0; i < n; i++) {
            int64_t v = -1;
            int count, tag = (i % 2 == 0) ? (int)(i % 4) : MPI_ANY_TAG;
            MPI_Status st;
            CHECK_MPI(MPI_Recv(&v, 1, MPI_INT64_T, sender, tag, MPI_COMM_WORLD, &st));
            CHECK_MPI(MPI_Get_count(&st, MPI_INT64_T, &count));
            CHECK(v == value(sender, round, i) && st.MPI_TAG == (int)(i % 4) &&
                      st.MPI_SOURCE == sender && count == 1,
                  "round %d: receive %ld got value %lld tag %d source %d count %d, expected "
                  "message %ld (value %lld tag %d)",
                  round, i, (long long)v, st.MPI_TAG, st.MPI_SOURCE, count, i,
                  (long long)value(sender, round, i), (int)(i % 4));
        }
        {
            int flag;
            CHECK_MPI(MPI_Iprobe(sender, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
            CHECK(!flag, "round %d: a message is left over after %ld", round, n);
        }
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    int rank, size, even, odd;
    long n;

    MPI_Init(&argc, &argv);
    test_begin("many_unexpected");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 2, "needs at least 2 ranks");
    n = argc > 1 ? atol(argv[1]) : 1000000;
    CHECK(n > 0, "bad N");
    even = rank - rank % 2;
    odd = even + 1;
    if (odd >= size) /* the odd rank out */
        even = odd = -1;
    run(rank, even, odd, n, 0);
    run(rank, odd, even, n / 10 + 1, 1);
    return test_end();
}
