/*
 * bsend.c - buffered-mode sends (MPI_Bsend, MPI_Ibsend, MPI_Buffer_attach/detach).
 *
 * Every rank sends to its right neighbour.  A buffer of exactly the size the standard asks for
 * (sum of message sizes + MPI_BSEND_OVERHEAD each) is attached; then all messages (0 B to 300 KB,
 * well past eager limits) are sent with MPI_Bsend, then with MPI_Ibsend + MPI_Waitall, before
 * any receive is posted anywhere: a barrier separates the sends from the receives, so the sends
 * must complete locally.  Received content, order and status are checked.  MPI_Buffer_detach
 * must give back the attached address and size (after all buffered data is delivered); the
 * buffer is then attached again and reused.  With MPI_ERRORS_RETURN, a Bsend that does not fit in
 * the attached buffer must fail with MPI_ERR_BUFFER, and the communicator must go on working.
 *
 * usage: bsend [--no-overflow]   (skips the buffer-overflow part)
 */
#include "stormtest.h"

static const int sizes[] = {0, 8, 4000, 70000, 300000, 12};
#define N 6

static int rank, size, left, right;
static unsigned char *sbuf[N];

static void fill_round(int round)
{
    int k;
    for (k = 0; k < N; k++)
        pattern_fill(sbuf[k], (size_t)sizes[k], test_key(rank, right, (size_t)sizes[k], round * 10 + k));
}

static void recv_round(int round)
{
    int k, count = -1;
    MPI_Status st;
    unsigned char *rbuf = test_malloc(300000);
    for (k = 0; k < N; k++) {
        long off;
        CHECK_MPI(MPI_Recv(rbuf, 300000, MPI_BYTE, left, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
        CHECK(st.MPI_TAG == k && count == sizes[k], "round %d: message %d arrived with tag %d, %d "
              "bytes (expected tag %d, %d bytes)", round, k, st.MPI_TAG, count, k, sizes[k]);
        off = pattern_check(rbuf, (size_t)count, test_key(left, rank, (size_t)count, round * 10 + k));
        CHECK(off < 0, "round %d: message %d (%d B) wrong at byte %ld", round, k, count, off);
    }
    free(rbuf);
}

int main(int argc, char **argv)
{
    int k, bsize = 0, dsize = -1, rc, cls = -1;
    char *attached, *detached = NULL;
    MPI_Request reqs[N];

    MPI_Init(&argc, &argv);
    test_begin("bsend");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;

    for (k = 0; k < N; k++) {
        sbuf[k] = test_malloc((size_t)sizes[k]);
        bsize += sizes[k] + MPI_BSEND_OVERHEAD;
    }
    attached = test_malloc((size_t)bsize);
    CHECK_MPI(MPI_Buffer_attach(attached, bsize));

    /* round 1: Bsend everything before anyone receives */
    fill_round(1);
    for (k = 0; k < N; k++)
        CHECK_MPI(MPI_Bsend(sbuf[k], sizes[k], MPI_BYTE, right, k, MPI_COMM_WORLD));
    /* the user buffers may be reused at once: scribble over them */
    for (k = 0; k < N; k++)
        memset(sbuf[k], 0xCC, (size_t)sizes[k]);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    recv_round(1);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* round 2: Ibsend, completes locally */
    fill_round(2);
    for (k = 0; k < N; k++)
        CHECK_MPI(MPI_Ibsend(sbuf[k], sizes[k], MPI_BYTE, right, k, MPI_COMM_WORLD, &reqs[k]));
    CHECK_MPI(MPI_Waitall(N, reqs, MPI_STATUSES_IGNORE));
    for (k = 0; k < N; k++)
        memset(sbuf[k], 0xCC, (size_t)sizes[k]);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    recv_round(2);

    CHECK_MPI(MPI_Buffer_detach(&detached, &dsize));
    CHECK(detached == attached && dsize == bsize, "Buffer_detach gave %p/%d, attached %p/%d",
          (void *)detached, dsize, (void *)attached, bsize);

    /* round 3: the same buffer attached again */
    CHECK_MPI(MPI_Buffer_attach(attached, bsize));
    fill_round(3);
    for (k = 0; k < N; k++)
        CHECK_MPI(MPI_Bsend(sbuf[k], sizes[k], MPI_BYTE, right, k, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    recv_round(3);
    CHECK_MPI(MPI_Buffer_detach(&detached, &dsize));
    CHECK(detached == attached && dsize == bsize, "second Buffer_detach gave %p/%d", (void *)detached,
          dsize);

    /* a message that does not fit in the attached buffer; then the communicator must still work */
    if (argc > 1 && strcmp(argv[1], "--no-overflow") == 0)
        goto done;
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Buffer_attach(attached, 100 + MPI_BSEND_OVERHEAD));
    rc = MPI_Bsend(sbuf[4], 5000, MPI_BYTE, right, 99, MPI_COMM_WORLD);
    CHECK(rc != MPI_SUCCESS, "Bsend of 5000 B into a %d-byte buffer succeeded",
          100 + MPI_BSEND_OVERHEAD);
    CHECK_MPI(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_BUFFER, "Bsend too large for the buffer: error class %d, expected "
          "MPI_ERR_BUFFER (%d)", cls, MPI_ERR_BUFFER);
    CHECK_MPI(MPI_Buffer_detach(&detached, &dsize));
    CHECK(dsize == 100 + MPI_BSEND_OVERHEAD, "third Buffer_detach size %d", dsize);
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    {
        int x = rank, y = -1;
        CHECK_MPI(MPI_Sendrecv(&x, 1, MPI_INT, right, 5, &y, 1, MPI_INT, left, 5, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
        CHECK(y == left, "after the failed Bsend: received %d from rank %d", y, left);
    }

done:
    for (k = 0; k < N; k++)
        free(sbuf[k]);
    free(attached);
    return test_end();
}
