/*
 * truncate.c - receiving a message into a buffer that is too small.
 *
 * With MPI_ERRORS_RETURN set on MPI_COMM_WORLD, every rank sends to its right neighbour, which
 * receives with a count smaller than the message.  For eager-sized and large messages, and for a
 * zero-size buffer, received by MPI_Recv, by MPI_Irecv + MPI_Wait and by MPI_Recv after a barrier
 * (the message there before the receive), checked:
 *   - MPI_Recv and MPI_Wait (after MPI_Irecv) return an error of class MPI_ERR_TRUNCATE;
 *   - MPI_Waitall over a fitting and a truncated receive returns MPI_ERR_IN_STATUS, the
 *     truncated request's status.MPI_ERROR has class MPI_ERR_TRUNCATE and the others' are
 *     MPI_SUCCESS, or MPI_ERR_PENDING with the request still active (MPI says single-completion calls need not fill status.MPI_ERROR, so for
 *     MPI_Recv/MPI_Wait only the return code is checked);
 *   - the status names the right source and tag;
 *   - nothing is written past the receive buffer (64 guard bytes);
 *   - the sender's send completes with MPI_SUCCESS;
 *   - the communicator still works: a fitting message with the same tag is received right after.
 */
#include "stormtest.h"

#define GUARD 64
#define GB 0xA5

static int rank, size, left, right;
static unsigned char *sbuf, *rbuf;

static void prep(int rcount)
{
    memset(rbuf, 0, (size_t)rcount);
    memset(rbuf + rcount, GB, GUARD);
}

static void check_guard(int rcount, const char *what)
{
    int g;
    for (g = 0; g < GUARD; g++)
        CHECK(rbuf[rcount + g] == GB, "%s: byte %d past the %d-byte receive buffer was overwritten",
              what, g, rcount);
}

static void check_trunc_rc(int rc, const char *what)
{
    int cls = -1;
    CHECK(rc != MPI_SUCCESS, "%s: returned MPI_SUCCESS for a message longer than the buffer", what);
    CHECK_MPI(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_TRUNCATE, "%s: error class %d, expected MPI_ERR_TRUNCATE (%d)", what, cls,
          MPI_ERR_TRUNCATE);
}

/* After a truncation: a message that fits, same tag, must arrive intact. */
static void still_works(int tag, const char *what)
{
    MPI_Request r;
    MPI_Status st;
    int count = -1;
    long off;
    pattern_fill(sbuf, 3000, test_key(rank, right, 3000, tag + 1000));
    CHECK_MPI(MPI_Isend(sbuf, 3000, MPI_BYTE, right, tag, MPI_COMM_WORLD, &r));
    prep(3000);
    CHECK_MPI(MPI_Recv(rbuf, 3000, MPI_BYTE, left, tag, MPI_COMM_WORLD, &st));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
    off = pattern_check(rbuf, 3000, test_key(left, rank, 3000, tag + 1000));
    CHECK(count == 3000 && off < 0, "after %s: follow-up message count %d, bad byte at %ld", what,
          count, off);
    check_guard(3000, what);
}

/* How the receive of a truncating exchange is made. */
enum mode {
    RECV,  /* MPI_Recv */
    IRECV, /* MPI_Irecv + MPI_Wait */
    EARLY, /* MPI_Recv after a barrier: the message came before the receive */
};

/* One truncating exchange: msg bytes sent, rcount bytes of buffer, received as `mode` says. */
static void truncated(int msg, int rcount, int tag, enum mode mode)
{
    static const char *const how[] = {"Recv", "Irecv+Wait", "Recv after a barrier"};
    char what[128];
    MPI_Request sreq, rreq;
    MPI_Status st;
    int rc, nb = mode == IRECV;
    snprintf(what, sizeof what, "%s of a %d-byte message into %d bytes", how[mode], msg, rcount);
    pattern_fill(sbuf, (size_t)msg, test_key(rank, right, (size_t)msg, tag));
    CHECK_MPI(MPI_Isend(sbuf, msg, MPI_BYTE, right, tag, MPI_COMM_WORLD, &sreq));
    if (mode == EARLY)
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    prep(rcount);
    st.MPI_SOURCE = st.MPI_TAG = -12345;
    if (nb) {
        CHECK_MPI(MPI_Irecv(rbuf, rcount, MPI_BYTE, left, tag, MPI_COMM_WORLD, &rreq));
        rc = MPI_Wait(&rreq, &st);
    } else {
        rc = MPI_Recv(rbuf, rcount, MPI_BYTE, left, tag, MPI_COMM_WORLD, &st);
    }
    check_trunc_rc(rc, what);
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == tag, "%s: status source %d tag %d, expected %d/%d",
          what, st.MPI_SOURCE, st.MPI_TAG, left, tag);
    check_guard(rcount, what);
    rc = MPI_Wait(&sreq, &st);
    CHECK(rc == MPI_SUCCESS, "%s: the sender's request completed with error %d", what, rc);
    still_works(tag, what);
}

int main(int argc, char **argv)
{
    const int big = 1 << 20;
    MPI_Errhandler eh;

    MPI_Init(&argc, &argv);
    test_begin("truncate");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "Comm_get_errhandler does not return MPI_ERRORS_RETURN");
    CHECK_MPI(MPI_Errhandler_free(&eh));
    sbuf = test_malloc((size_t)big);
    rbuf = test_malloc((size_t)big + GUARD);

    truncated(100, 50, 1, RECV);
    truncated(100, 0, 2, RECV);
    truncated(big, big / 2, 3, RECV);
    truncated(1000, 999, 4, IRECV);
    truncated(300000, 299999, 5, IRECV);
    truncated(65536, 4096, 6, IRECV);
    truncated(100, 50, 11, EARLY);
    truncated(100, 0, 12, EARLY);
    truncated(big, big / 2, 13, EARLY);

    /* Waitall: a fitting receive (tag 7) and a truncated one (tag 8, large) */
    {
        MPI_Request reqs[4];
        MPI_Status stats[4];
        unsigned char *fit = test_malloc(5000);
        int rc, cls = -1, count = -1, i;
        long off;
        unsigned char *sbuf2 = test_malloc(200000);
        pattern_fill(sbuf, 5000, test_key(rank, right, 5000, 7));
        pattern_fill(sbuf2, 200000, test_key(rank, right, 200000, 8));
        prep(100000);
        CHECK_MPI(MPI_Irecv(fit, 5000, MPI_BYTE, left, 7, MPI_COMM_WORLD, &reqs[0]));
        CHECK_MPI(MPI_Irecv(rbuf, 100000, MPI_BYTE, left, 8, MPI_COMM_WORLD, &reqs[1]));
        CHECK_MPI(MPI_Isend(sbuf, 5000, MPI_BYTE, right, 7, MPI_COMM_WORLD, &reqs[2]));
        CHECK_MPI(MPI_Isend(sbuf2, 200000, MPI_BYTE, right, 8, MPI_COMM_WORLD, &reqs[3]));
        rc = MPI_Waitall(4, reqs, stats);
        CHECK(rc == MPI_ERR_IN_STATUS, "Waitall with a truncated receive returned %d, expected "
              "MPI_ERR_IN_STATUS", rc);
        CHECK_MPI(MPI_Error_class(stats[1].MPI_ERROR, &cls));
        CHECK(cls == MPI_ERR_TRUNCATE, "Waitall: truncated receive's status.MPI_ERROR has class %d",
              cls);
        /* The others either completed (MPI_SUCCESS) or, as MPI allows, were left pending
         * (MPI_ERR_PENDING, request still active): then they must complete with MPI_Wait. */
        for (i = 0; i < 4; i++) {
            if (i == 1)
                continue;
            CHECK(stats[i].MPI_ERROR == MPI_SUCCESS || stats[i].MPI_ERROR == MPI_ERR_PENDING,
                  "Waitall: status.MPI_ERROR of good request %d is %d", i, stats[i].MPI_ERROR);
            if (stats[i].MPI_ERROR == MPI_ERR_PENDING) {
                CHECK(reqs[i] != MPI_REQUEST_NULL, "Waitall: request %d is MPI_ERR_PENDING but freed", i);
                CHECK_MPI(MPI_Wait(&reqs[i], &stats[i]));
            } else {
                CHECK(reqs[i] == MPI_REQUEST_NULL, "Waitall: completed request %d not freed", i);
            }
        }
        CHECK(stats[1].MPI_SOURCE == left && stats[1].MPI_TAG == 8,
              "Waitall: truncated receive status source %d tag %d", stats[1].MPI_SOURCE,
              stats[1].MPI_TAG);
        CHECK_MPI(MPI_Get_count(&stats[0], MPI_BYTE, &count));
        off = pattern_check(fit, 5000, test_key(left, rank, 5000, 7));
        CHECK(count == 5000 && off < 0, "Waitall: fitting receive count %d, bad byte %ld", count, off);
        check_guard(100000, "Waitall truncated receive");
        still_works(8, "Waitall truncation");
        free(fit);
        free(sbuf2);
    }

    free(sbuf);
    free(rbuf);
    return test_end();
}
