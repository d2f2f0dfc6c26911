/*
 * sendrecv_replace.c - MPI_Sendrecv_replace: send a buffer and receive into the same buffer.
 *
 * The buffers shift around the ring (rank r sends to r+1 and receives from r-1) size times, so
 * every buffer visits every rank and comes home; after each step the content must be the
 * pattern of the rank it started on.  Sizes 0 B, 1 int, 1000 ints, 64 KiB and 1 MiB (past any
 * eager limit, so the library must stage the data).  The receive side also uses MPI_ANY_SOURCE /
 * MPI_ANY_TAG (status checked).  With MPI_PROC_NULL as both peers the buffer stays unchanged and
 * the status is the empty one from MPI_PROC_NULL.
 */
#include "stormtest.h"

static const int counts[] = {0, 1, 1000, 16384, 262144}; /* ints */
#define N 5

int main(int argc, char **argv)
{
    int rank, size, left, right, k, step, count;
    int *buf;
    MPI_Status st;

    MPI_Init(&argc, &argv);
    test_begin("sendrecv_replace");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    buf = test_malloc(sizeof(int) * 262144);

    for (k = 0; k < N; k++) {
        int n = counts[k];
        size_t bytes = sizeof(int) * (size_t)n;
        pattern_fill(buf, bytes, test_key(rank, -1, bytes, k));
        for (step = 1; step <= size; step++) {
            int origin = (rank - step % size + size) % size;
            int wild = step % 2 == 0;
            long off;
            CHECK_MPI(MPI_Sendrecv_replace(buf, n, MPI_INT, right, 7, wild ? MPI_ANY_SOURCE : left,
                                           wild ? MPI_ANY_TAG : 7, MPI_COMM_WORLD, &st));
            CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
            CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 7 && count == n,
                  "%d ints, step %d: status source %d tag %d count %d", n, step, st.MPI_SOURCE,
                  st.MPI_TAG, count);
            off = pattern_check(buf, bytes, test_key(origin, -1, bytes, k));
            CHECK(off < 0, "%d ints, step %d: buffer should hold rank %d's data; byte %ld differs", n,
                  step, origin, off);
        }
    }

    /* MPI_PROC_NULL on both sides: nothing changes */
    pattern_fill(buf, 4000, test_key(rank, -2, 4000, 0));
    CHECK_MPI(MPI_Sendrecv_replace(buf, 1000, MPI_INT, MPI_PROC_NULL, 1, MPI_PROC_NULL, 1,
                                   MPI_COMM_WORLD, &st));
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && count == 0,
          "PROC_NULL: status source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, count);
    CHECK(pattern_check(buf, 4000, test_key(rank, -2, 4000, 0)) < 0,
          "Sendrecv_replace with MPI_PROC_NULL peers changed the buffer");

    /* send to the right, receive nothing (PROC_NULL) / receive from the left, send nothing */
    {
        int v = rank * 11;
        if (rank % 2 == 0) {
            CHECK_MPI(MPI_Sendrecv_replace(&v, 1, MPI_INT, right, 9, MPI_PROC_NULL, 9,
                                           MPI_COMM_WORLD, &st));
            CHECK(v == rank * 11, "send-only Sendrecv_replace changed the buffer to %d", v);
        }
        if (rank % 2 == 1 || (size % 2 == 1 && rank == 0)) {
            v = -1;
            CHECK_MPI(MPI_Sendrecv_replace(&v, 1, MPI_INT, MPI_PROC_NULL, 9, left, 9,
                                           MPI_COMM_WORLD, &st));
            CHECK(v == left * 11 && st.MPI_SOURCE == left, "receive-only Sendrecv_replace got %d "
                  "from %d", v, st.MPI_SOURCE);
        }
    }
    free(buf);
    return test_end();
}
