/*
 * ssend.c - synchronous-mode send semantics.
 *
 * Ranks work in pairs (0,1), (2,3), ...; with an odd rank count the last rank only joins the
 * barriers.  For 0 B, 8 B, 4 KiB and 1 MiB messages:
 *   - MPI_Issend must not complete before the receiver has posted the matching receive: the
 *     sender calls MPI_Test repeatedly for ~100 ms (sleeping 2 ms between calls) and every call
 *     must report "not complete".  Only then does it send a "go" message on another tag; the
 *     receiver posts the data receive only after receiving "go".  Then the Issend must complete
 *     and the data must be right.
 *   - blocking MPI_Ssend must not return before the receiver posts: the receiver sleeps 200 ms
 *     after a barrier before posting, and the sender's Ssend must take at least 50 ms (the
 *     margin absorbs scheduling delays on an oversubscribed machine).
 */
#include "stormtest.h"

#define TAG_DATA 10
#define TAG_GO 11

static const int sizes[] = {0, 8, 4096, 1 << 20};
#define NSIZES 4

int main(int argc, char **argv)
{
    int rank, size, k, peer, sender, go = 1;
    unsigned char *buf;
    MPI_Status st;

    MPI_Init(&argc, &argv);
    test_begin("ssend");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    peer = (rank % 2 == 0) ? rank + 1 : rank - 1;
    if (peer >= size)
        peer = MPI_PROC_NULL; /* odd one out */
    sender = (rank % 2 == 0);
    buf = test_malloc(1 << 20);

    for (k = 0; k < NSIZES; k++) {
        int len = sizes[k], count = -1;
        uint64_t key = test_key(rank, peer, (size_t)len, k);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (peer == MPI_PROC_NULL)
            continue;
        if (sender) {
            MPI_Request req;
            int flag = 0, tests = 0;
            double t0;
            pattern_fill(buf, (size_t)len, key);
            CHECK_MPI(MPI_Issend(buf, len, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &req));
            t0 = MPI_Wtime();
            while (MPI_Wtime() - t0 < 0.1) {
                CHECK_MPI(MPI_Test(&req, &flag, &st));
                CHECK(!flag, "Issend of %d B completed (after %d MPI_Test calls) before the "
                      "receiver posted its receive", len, tests + 1);
                tests++;
                test_sleep_ms(2);
            }
            CHECK_MPI(MPI_Send(&go, 1, MPI_INT, peer, TAG_GO, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Wait(&req, &st));
        } else {
            long off;
            CHECK_MPI(MPI_Recv(&go, 1, MPI_INT, peer, TAG_GO, MPI_COMM_WORLD, &st));
            memset(buf, 0, (size_t)len);
            CHECK_MPI(MPI_Recv(buf, len, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &st));
            CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
            CHECK(count == len && st.MPI_SOURCE == peer && st.MPI_TAG == TAG_DATA,
                  "Issend %d B: count %d source %d tag %d", len, count, st.MPI_SOURCE, st.MPI_TAG);
            off = pattern_check(buf, (size_t)len, test_key(peer, rank, (size_t)len, k));
            CHECK(off < 0, "Issend %d B: data wrong at byte %ld", len, off);
        }
    }

    for (k = 0; k < NSIZES; k++) {
        int len = sizes[k], count = -1;
        uint64_t key = test_key(rank, peer, (size_t)len, 100 + k);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (peer == MPI_PROC_NULL)
            continue;
        if (sender) {
            double t0, dt;
            pattern_fill(buf, (size_t)len, key);
            t0 = MPI_Wtime();
            CHECK_MPI(MPI_Ssend(buf, len, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD));
            dt = MPI_Wtime() - t0;
            CHECK(dt >= 0.05, "Ssend of %d B returned after %.1f ms, but the receiver posted its "
                  "receive only after 200 ms", len, dt * 1e3);
        } else {
            long off;
            test_sleep_ms(200);
            memset(buf, 0, (size_t)len);
            CHECK_MPI(MPI_Recv(buf, len, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &st));
            CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
            CHECK(count == len, "Ssend %d B: count %d", len, count);
            off = pattern_check(buf, (size_t)len, test_key(peer, rank, (size_t)len, 100 + k));
            CHECK(off < 0, "Ssend %d B: data wrong at byte %ld", len, off);
        }
    }
    free(buf);
    return test_end();
}
