/*
 * grequest.c - generalized requests, MPI_Request_get_status and the status setters.
 *
 * Checked: a request from MPI_Grequest_start is incomplete (MPI_Test, MPI_Request_get_status)
 * until MPI_Grequest_complete; MPI_Request_get_status then says complete with the status the
 * query function writes (source, tag, MPI_Status_set_elements) and leaves the request alive;
 * MPI_Wait calls the query and then the free function once and makes the handle null;
 * MPI_Request_free before completion calls the free function once (by MPI_Grequest_complete),
 * after completion at once; MPI_Cancel calls the cancel function with whether it completed, and a
 * query that sets MPI_Status_set_cancelled makes MPI_Test_cancelled true; generalized requests
 * completed by MPI_Waitall beside point-to-point ones and by MPI_Testany; Request_get_status
 * on a receive (incomplete until the message is sent, then complete; the request stays usable)
 * and on MPI_REQUEST_NULL (complete, empty status); MPI_Status_set_elements(_x) on a predefined
 * and a derived type, read back by MPI_Get_elements(_x) and MPI_Get_count.
 *
 * usage: grequest
 */
#include "stormtest.h"

typedef struct {
    int queries, frees, cancels, cancel_complete, cancelled, elements, tag;
} state;

static int query_fn(void *extra, MPI_Status *st)
{
    state *s = extra;
    s->queries++;
    st->MPI_SOURCE = 1234;
    st->MPI_TAG = s->tag;
    st->MPI_ERROR = MPI_SUCCESS;
    MPI_Status_set_elements(st, MPI_INT, s->elements);
    MPI_Status_set_cancelled(st, s->cancelled);
    return MPI_SUCCESS;
}

static int free_fn(void *extra)
{
    ((state *)extra)->frees++;
    return MPI_SUCCESS;
}

static int cancel_fn(void *extra, int complete)
{
    state *s = extra;
    s->cancels++;
    s->cancel_complete = complete;
    if (!complete)
        s->cancelled = 1;
    return MPI_SUCCESS;
}

static state fresh(int elements, int tag)
{
    state s;
    memset(&s, 0, sizeof s);
    s.elements = elements;
    s.tag = tag;
    return s;
}

int main(int argc, char **argv)
{
    int rank, size, flag, n, i;
    MPI_Request rq, rqs[3];
    MPI_Status st, sts[3];
    MPI_Count nx;
    state s, s2;

    MPI_Init(&argc, &argv);
    test_begin("grequest");
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));

    /* the life of one generalized request */
    s = fresh(5, 77);
    CHECK_MPI(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &s, &rq));
    CHECK(rq != MPI_REQUEST_NULL, "Grequest_start gave MPI_REQUEST_NULL");
    CHECK_MPI(MPI_Test(&rq, &flag, &st));
    CHECK(!flag && rq != MPI_REQUEST_NULL, "complete before MPI_Grequest_complete");
    CHECK_MPI(MPI_Request_get_status(rq, &flag, &st));
    CHECK(!flag, "Request_get_status: complete before MPI_Grequest_complete");
    CHECK(s.queries == 0 && s.frees == 0, "callbacks called early: %d queries %d frees",
          s.queries, s.frees);
    CHECK_MPI(MPI_Grequest_complete(rq));
    CHECK_MPI(MPI_Request_get_status(rq, &flag, &st));
    CHECK(flag && s.queries == 1 && s.frees == 0 && rq != MPI_REQUEST_NULL,
          "Request_get_status after completion: flag %d, %d queries, %d frees", flag, s.queries,
          s.frees);
    CHECK(st.MPI_SOURCE == 1234 && st.MPI_TAG == 77, "Request_get_status: source %d tag %d",
          st.MPI_SOURCE, st.MPI_TAG);
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(n == 5, "Request_get_status: count %d, expected 5", n);
    s.elements = 6;
    CHECK_MPI(MPI_Wait(&rq, &st));
    CHECK(rq == MPI_REQUEST_NULL, "Wait left the generalized request");
    CHECK(s.queries == 2 && s.frees == 1, "after Wait: %d queries, %d frees", s.queries, s.frees);
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(n == 6 && st.MPI_SOURCE == 1234 && st.MPI_TAG == 77,
          "Wait status: count %d source %d tag %d", n, st.MPI_SOURCE, st.MPI_TAG);
    CHECK_MPI(MPI_Test_cancelled(&st, &flag));
    CHECK(!flag, "not cancelled, yet Test_cancelled");

    /* freed before completion: the free function runs at MPI_Grequest_complete */
    s = fresh(0, 1);
    CHECK_MPI(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &s, &rq));
    {
        MPI_Request keep = rq;
        CHECK_MPI(MPI_Request_free(&rq));
        /* (MPICH 4.0 calls the free function here already; the standard says at the later of
         * the two calls) */
        CHECK(rq == MPI_REQUEST_NULL && s.frees <= 1, "Request_free: handle %d, %d frees",
              rq == MPI_REQUEST_NULL, s.frees);
        CHECK_MPI(MPI_Grequest_complete(keep));
        CHECK(s.frees == 1 && s.queries == 0, "complete after free: %d frees %d queries",
              s.frees, s.queries);
    }
    /* freed after completion: at once */
    s = fresh(0, 1);
    CHECK_MPI(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &s, &rq));
    CHECK_MPI(MPI_Grequest_complete(rq));
    CHECK_MPI(MPI_Request_free(&rq));
    CHECK(s.frees == 1 && s.queries == 0, "free after completion: %d frees %d queries", s.frees,
          s.queries);

    /* cancel */
    s = fresh(0, 2);
    CHECK_MPI(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &s, &rq));
    CHECK_MPI(MPI_Cancel(&rq));
    CHECK(s.cancels == 1 && s.cancel_complete == 0, "Cancel: %d calls, complete %d", s.cancels,
          s.cancel_complete);
    CHECK_MPI(MPI_Grequest_complete(rq));
    CHECK_MPI(MPI_Wait(&rq, &st));
    CHECK_MPI(MPI_Test_cancelled(&st, &flag));
    CHECK(flag, "cancelled by the query, yet not Test_cancelled");

    /* Waitall with point-to-point beside; Testany */
    {
        int to = (rank + 1) % size, from = (rank + size - 1) % size, out = rank, in = -1;
        s = fresh(3, 10);
        s2 = fresh(4, 11);
        CHECK_MPI(MPI_Irecv(&in, 1, MPI_INT, from, 9, MPI_COMM_WORLD, &rqs[0]));
        CHECK_MPI(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &s, &rqs[1]));
        CHECK_MPI(MPI_Isend(&out, 1, MPI_INT, to, 9, MPI_COMM_WORLD, &rqs[2]));
        CHECK_MPI(MPI_Grequest_complete(rqs[1]));
        CHECK_MPI(MPI_Waitall(3, rqs, sts));
        CHECK(in == from && sts[0].MPI_SOURCE == from && sts[0].MPI_TAG == 9,
              "Waitall: received %d from %d tag %d", in, sts[0].MPI_SOURCE, sts[0].MPI_TAG);
        CHECK(sts[1].MPI_TAG == 10 && s.frees == 1 && s.queries == 1,
              "Waitall: generalized tag %d, %d frees, %d queries", sts[1].MPI_TAG, s.frees,
              s.queries);
        CHECK_MPI(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &s2, &rqs[0]));
        rqs[1] = MPI_REQUEST_NULL;
        CHECK_MPI(MPI_Testany(2, rqs, &i, &flag, &st));
        CHECK(!flag, "Testany: an incomplete generalized request completed");
        CHECK_MPI(MPI_Grequest_complete(rqs[0]));
        CHECK_MPI(MPI_Testany(2, rqs, &i, &flag, &st));
        CHECK(flag && i == 0 && st.MPI_TAG == 11 && s2.frees == 1,
              "Testany: flag %d index %d tag %d frees %d", flag, i, st.MPI_TAG, s2.frees);
    }

    /* Request_get_status on a receive, and on MPI_REQUEST_NULL */
    if (size >= 2 && rank < 2) {
        int v = -1, w = 42;
        if (rank == 0) {
            CHECK_MPI(MPI_Irecv(&v, 1, MPI_INT, 1, 21, MPI_COMM_WORLD, &rq));
            CHECK_MPI(MPI_Request_get_status(rq, &flag, &st));
            CHECK(!flag, "Request_get_status: a receive whose message is not sent is complete");
            CHECK_MPI(MPI_Send(&w, 1, MPI_INT, 1, 20, MPI_COMM_WORLD));
            do {
                CHECK_MPI(MPI_Request_get_status(rq, &flag, &st));
            } while (!flag);
            CHECK(st.MPI_SOURCE == 1 && st.MPI_TAG == 21 && rq != MPI_REQUEST_NULL,
                  "Request_get_status: source %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
            CHECK_MPI(MPI_Wait(&rq, &st));
            CHECK(v == 43 && rq == MPI_REQUEST_NULL, "received %d", v);
        } else {
            CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 0, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            v++;
            CHECK_MPI(MPI_Send(&v, 1, MPI_INT, 0, 21, MPI_COMM_WORLD));
        }
    }
    rq = MPI_REQUEST_NULL;
    CHECK_MPI(MPI_Request_get_status(rq, &flag, &st));
    CHECK(flag && st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG,
          "Request_get_status(MPI_REQUEST_NULL): flag %d source %d tag %d", flag, st.MPI_SOURCE,
          st.MPI_TAG);

    /* status setters */
    {
        MPI_Datatype t3;
        CHECK_MPI(MPI_Type_contiguous(3, MPI_INT, &t3));
        CHECK_MPI(MPI_Type_commit(&t3));
        CHECK_MPI(MPI_Status_set_elements(&st, MPI_DOUBLE, 4));
        CHECK_MPI(MPI_Get_count(&st, MPI_DOUBLE, &n));
        CHECK(n == 4, "set_elements(MPI_DOUBLE, 4): count %d", n);
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &n));
        CHECK(n == 4 * (int)sizeof(double), "set_elements(MPI_DOUBLE, 4): %d bytes", n);
        {
            /* MPICH 4.0 takes the count of MPI_Status_set_elements as whole instances of the
             * type (7 of 3 ints: Get_elements says 21); the standard, Open MPI and stormpi as
             * basic elements. */
            char lib[MPI_MAX_LIBRARY_VERSION_STRING];
            int len;
            CHECK_MPI(MPI_Get_library_version(lib, &len));
            if (strncmp(lib, "MPICH", 5) == 0) {
                if (rank == 0)
                    printf("note: MPICH counts MPI_Status_set_elements in instances: derived "
                           "type checks skipped\n");
                CHECK_MPI(MPI_Type_free(&t3));
                return test_end();
            }
        }
        CHECK_MPI(MPI_Status_set_elements(&st, t3, 7));
        CHECK_MPI(MPI_Get_elements(&st, t3, &n));
        CHECK(n == 7, "set_elements(3 ints, 7): Get_elements %d", n);
        CHECK_MPI(MPI_Get_count(&st, t3, &n));
        CHECK(n == MPI_UNDEFINED, "set_elements(3 ints, 7): Get_count %d, expected MPI_UNDEFINED",
              n);
        CHECK_MPI(MPI_Status_set_elements_x(&st, t3, (MPI_Count)6));
        CHECK_MPI(MPI_Get_elements_x(&st, t3, &nx));
        CHECK(nx == 6, "set_elements_x(3 ints, 6): Get_elements_x %lld", (long long)nx);
        CHECK_MPI(MPI_Get_count(&st, t3, &n));
        CHECK(n == 2, "set_elements_x(3 ints, 6): Get_count %d", n);
        CHECK_MPI(MPI_Status_set_cancelled(&st, 1));
        CHECK_MPI(MPI_Test_cancelled(&st, &flag));
        CHECK(flag, "set_cancelled(1) not seen");
        CHECK_MPI(MPI_Status_set_cancelled(&st, 0));
        CHECK_MPI(MPI_Test_cancelled(&st, &flag));
        CHECK(!flag, "set_cancelled(0) not seen");
        CHECK_MPI(MPI_Get_elements_x(&st, t3, &nx));
        CHECK(nx == 6, "set_cancelled changed the count: %lld", (long long)nx);
        CHECK_MPI(MPI_Type_free(&t3));
    }
    return test_end();
}
