/*
 * self_comm.c - point-to-point and collectives on MPI_COMM_SELF and on a duplicate of it, in every
 * rank at once, in the call sequences mpi4py uses (issue 27):
 *   - MPI_Irecv, then MPI_Send of a message to oneself, then MPI_Wait (the message is bigger than
 *     an eager fragment too), and the same with MPI_Isend + MPI_Recv;
 *   - on a dup of MPI_COMM_SELF: MPI_Irecv, then MPI_Bsend into an attached buffer, then Wait,
 *     several times (each message must arrive once, in order);
 *   - MPI_Probe + MPI_Get_count + MPI_Recv of an unexpected message to oneself;
 *   - MPI_Issend to oneself, MPI_Cancel, MPI_Request_get_status (mpi4py's testCancel: the
 *     request stays; when the send was not cancelled, the message is received and the request
 *     completes) - once failing, this left the message behind for the next receives to take;
 *   - a Barrier, Bcast and Allreduce on MPI_COMM_SELF in between.
 * Every payload and status is checked.
 */
#include "stormtest.h"

static void fill(int *buf, int n, int seed)
{
    int i;
    for (i = 0; i < n; i++)
        buf[i] = seed * 1000003 + i;
}

static void check(const int *buf, int n, int seed, const char *what)
{
    int i;
    for (i = 0; i < n; i++)
        CHECK(buf[i] == seed * 1000003 + i, "%s: element %d of %d is %d, expected %d", what, i, n,
              buf[i], seed * 1000003 + i);
}

static void status_ok(const MPI_Status *st, int tag, int n, const char *what)
{
    int count = -1;
    CHECK(st->MPI_SOURCE == 0, "%s: status source %d, expected 0", what, st->MPI_SOURCE);
    CHECK(st->MPI_TAG == tag, "%s: status tag %d, expected %d", what, st->MPI_TAG, tag);
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &count));
    CHECK(count == n, "%s: count %d, expected %d", what, count, n);
}

/* Irecv posted first, then a blocking Send to oneself (and the reverse order with Isend). */
static void irecv_send(MPI_Comm comm, int n, int seed)
{
    int *in = test_malloc(sizeof(int) * (size_t)n), *out = test_malloc(sizeof(int) * (size_t)n);
    MPI_Request req;
    MPI_Status st;
    memset(in, 0xee, sizeof(int) * (size_t)n);
    fill(out, n, seed);
    CHECK_MPI(MPI_Irecv(in, n, MPI_INT, 0, 7, comm, &req));
    CHECK_MPI(MPI_Send(out, n, MPI_INT, 0, 7, comm));
    CHECK_MPI(MPI_Wait(&req, &st));
    check(in, n, seed, "Irecv + Send to self");
    status_ok(&st, 7, n, "Irecv + Send to self");

    memset(in, 0xee, sizeof(int) * (size_t)n);
    fill(out, n, seed + 1);
    CHECK_MPI(MPI_Isend(out, n, MPI_INT, 0, 8, comm, &req));
    CHECK_MPI(MPI_Recv(in, n, MPI_INT, 0, 8, comm, &st));
    CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    check(in, n, seed + 1, "Isend + Recv from self");
    status_ok(&st, 8, n, "Isend + Recv from self");
    free(in);
    free(out);
}

/* Irecv + Bsend to oneself, `rounds` times, with a buffer that holds one message at a time. */
static void irecv_bsend(MPI_Comm comm, int n, int rounds)
{
    int size = 0, r;
    int *in = test_malloc(sizeof(int) * (size_t)n), *out = test_malloc(sizeof(int) * (size_t)n);
    void *buf, *old;
    CHECK_MPI(MPI_Pack_size(n, MPI_INT, comm, &size));
    size += MPI_BSEND_OVERHEAD;
    buf = test_malloc((size_t)size);
    CHECK_MPI(MPI_Buffer_attach(buf, size));
    for (r = 0; r < rounds; r++) {
        MPI_Request req;
        MPI_Status st;
        memset(in, 0xee, sizeof(int) * (size_t)n);
        fill(out, n, 100 + r);
        CHECK_MPI(MPI_Irecv(in, n, MPI_INT, 0, 9, comm, &req));
        CHECK_MPI(MPI_Bsend(out, n, MPI_INT, 0, 9, comm));
        CHECK_MPI(MPI_Wait(&req, &st));
        check(in, n, 100 + r, "Irecv + Bsend to self");
        status_ok(&st, 9, n, "Irecv + Bsend to self");
    }
    CHECK_MPI(MPI_Buffer_detach(&old, &size));
    free(buf);
    free(in);
    free(out);
}

/* An unexpected message to oneself, probed and received. */
static void probe_recv(MPI_Comm comm, int n, int seed)
{
    int *in = test_malloc(sizeof(int) * (size_t)n), *out = test_malloc(sizeof(int) * (size_t)n);
    MPI_Request req;
    MPI_Status st;
    int count = -1;
    fill(out, n, seed);
    CHECK_MPI(MPI_Isend(out, n, MPI_INT, 0, 11, comm, &req));
    CHECK_MPI(MPI_Probe(0, MPI_ANY_TAG, comm, &st));
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(count == n && st.MPI_TAG == 11, "Probe on self: count %d tag %d, expected %d and 11",
          count, st.MPI_TAG, n);
    CHECK_MPI(MPI_Recv(in, n, MPI_INT, 0, 11, comm, &st));
    CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    check(in, n, seed, "Probe + Recv on self");
    free(in);
    free(out);
}

/* Issend to oneself, Cancel, then Request_get_status until the send completes. */
static void issend_cancel(MPI_Comm comm, int n, int seed)
{
    int *in = test_malloc(sizeof(int) * (size_t)n), *out = test_malloc(sizeof(int) * (size_t)n);
    MPI_Request req;
    MPI_Status st;
    int flag = -1, cancelled = -1;
    fill(out, n, seed);
    CHECK_MPI(MPI_Issend(out, n, MPI_INT, 0, 0, comm, &req));
    CHECK_MPI(MPI_Cancel(&req));
    CHECK_MPI(MPI_Request_get_status(req, &flag, &st));
    CHECK(req != MPI_REQUEST_NULL, "MPI_Request_get_status freed the request");
    if (flag) {
        CHECK_MPI(MPI_Test_cancelled(&st, &cancelled));
        CHECK(cancelled, "an unmatched Issend completed without being cancelled");
        CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    } else {
        memset(in, 0xee, sizeof(int) * (size_t)n);
        CHECK_MPI(MPI_Recv(in, n, MPI_INT, 0, 0, comm, &st));
        check(in, n, seed, "Issend + Cancel + Recv from self");
        do
            CHECK_MPI(MPI_Request_get_status(req, &flag, MPI_STATUS_IGNORE));
        while (!flag);
        CHECK(req != MPI_REQUEST_NULL, "MPI_Request_get_status freed the request");
        CHECK_MPI(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
        CHECK(flag && req == MPI_REQUEST_NULL, "MPI_Test of a completed send: flag %d", flag);
    }
    free(in);
    free(out);
}

static void collectives(MPI_Comm comm, int seed)
{
    int v = seed, sum = -1;
    CHECK_MPI(MPI_Barrier(comm));
    CHECK_MPI(MPI_Bcast(&v, 1, MPI_INT, 0, comm));
    CHECK(v == seed, "Bcast on self changed %d into %d", seed, v);
    CHECK_MPI(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, comm));
    CHECK(sum == seed, "Allreduce on self gave %d, expected %d", sum, seed);
}

int main(int argc, char **argv)
{
    static const int sizes[] = {0, 1, 7, 100, 5000, 70000};
    MPI_Comm dup, dup2;
    int rank, i, s;
    MPI_Init(&argc, &argv);
    test_begin("self_comm");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);

    CHECK_MPI(MPI_Comm_dup(MPI_COMM_SELF, &dup));
    for (i = 0; i < 3; i++) {
        for (s = 0; s < (int)(sizeof sizes / sizeof sizes[0]); s++) {
            int seed = rank * 100 + i * 10 + s;
            issend_cancel(MPI_COMM_SELF, sizes[s], seed + 3);
            issend_cancel(dup, sizes[s], seed + 4);
            irecv_send(MPI_COMM_SELF, sizes[s], seed);
            collectives(MPI_COMM_SELF, seed);
            irecv_send(dup, sizes[s], seed + 5);
            irecv_bsend(dup, sizes[s], 4);
            irecv_bsend(MPI_COMM_SELF, sizes[s], 2);
            probe_recv(dup, sizes[s], seed + 7);
            probe_recv(MPI_COMM_SELF, sizes[s], seed + 8);
        }
        /* a dup of the dup, made and freed while messages to self come and go */
        CHECK_MPI(MPI_Comm_dup(dup, &dup2));
        irecv_bsend(dup2, 10, 3);
        irecv_send(dup2, 10, 77);
        CHECK_MPI(MPI_Comm_free(&dup2));
    }
    CHECK_MPI(MPI_Comm_free(&dup));
    return test_end();
}
