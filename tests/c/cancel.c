/*
 * cancel.c - cancelling receives (MPI_Cancel, MPI_Test_cancelled).
 *
 * Ranks pair up (0,1), (2,3)...; an odd rank out only joins the barriers.
 *   1. a receive that can never match (tag nobody sends), also one with MPI_ANY_SOURCE: Cancel,
 *      then Wait completes and Test_cancelled says true;
 *   2. a persistent receive (Recv_init + Start) cancelled the same way stays a valid inactive
 *      request that can be started again and then receives normally;
 *   3. a receive that has already been matched: the peer sends with MPI_Ssend (which returns
 *      only once the receive has matched) and then a "done" message; only after "done" arrived
 *      is Cancel called: the receive completes normally, Test_cancelled says false, data intact;
 *   4. after a cancelled receive for tag T, a message later sent with tag T is not lost: it is
 *      received by a new receive.
 */
#include "stormtest.h"

#define TAG_NEVER 900
#define TAG_DATA 901
#define TAG_DONE 902
#define TAG_LATE 903

int main(int argc, char **argv)
{
    int rank, size, peer, flag, buf[16], i, count;
    MPI_Request req;
    MPI_Status st;

    MPI_Init(&argc, &argv);
    test_begin("cancel");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    peer = rank % 2 == 0 ? rank + 1 : rank - 1;
    if (peer >= size)
        peer = MPI_PROC_NULL;

    if (peer != MPI_PROC_NULL) {
        /* 1. never-matching receives */
        CHECK_MPI(MPI_Irecv(buf, 16, MPI_INT, peer, TAG_NEVER, MPI_COMM_WORLD, &req));
        CHECK_MPI(MPI_Cancel(&req));
        CHECK_MPI(MPI_Wait(&req, &st));
        CHECK(req == MPI_REQUEST_NULL, "Wait on a cancelled receive did not free the request");
        flag = 0;
        CHECK_MPI(MPI_Test_cancelled(&st, &flag));
        CHECK(flag, "cancelled unmatched receive: Test_cancelled is false");

        CHECK_MPI(MPI_Irecv(buf, 16, MPI_INT, MPI_ANY_SOURCE, TAG_NEVER, MPI_COMM_WORLD, &req));
        CHECK_MPI(MPI_Cancel(&req));
        flag = 0;
        for (i = 0; !flag; i++) {
            CHECK(i < 10000, "Test never completed a cancelled ANY_SOURCE receive");
            CHECK_MPI(MPI_Test(&req, &flag, &st));
            if (!flag)
                test_sleep_ms(1);
        }
        flag = 0;
        CHECK_MPI(MPI_Test_cancelled(&st, &flag));
        CHECK(flag, "cancelled ANY_SOURCE receive: Test_cancelled is false");

        /* 2. persistent receive: cancel, then use again */
        CHECK_MPI(MPI_Recv_init(buf, 16, MPI_INT, peer, TAG_LATE, MPI_COMM_WORLD, &req));
        CHECK_MPI(MPI_Start(&req));
        CHECK_MPI(MPI_Cancel(&req));
        CHECK_MPI(MPI_Wait(&req, &st));
        CHECK(req != MPI_REQUEST_NULL, "Wait freed a cancelled persistent request");
        flag = 0;
        CHECK_MPI(MPI_Test_cancelled(&st, &flag));
        CHECK(flag, "cancelled persistent receive: Test_cancelled is false");
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    if (peer != MPI_PROC_NULL) {
        /* 4 (and 2 continued): a message with the cancelled tag sent now must be received by
         * the restarted persistent request */
        int v = 5000 + rank;
        CHECK_MPI(MPI_Start(&req));
        CHECK_MPI(MPI_Send(&v, 1, MPI_INT, peer, TAG_LATE, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Wait(&req, &st));
        flag = 1;
        CHECK_MPI(MPI_Test_cancelled(&st, &flag));
        CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
        CHECK(!flag && count == 1 && buf[0] == 5000 + peer,
              "restarted persistent receive: cancelled %d count %d value %d", flag, count, buf[0]);
        CHECK_MPI(MPI_Request_free(&req));

        /* 3. cancel after the receive has matched */
        if (rank % 2 == 0) {
            int go = 0;
            for (i = 0; i < 16; i++)
                buf[i] = -1;
            CHECK_MPI(MPI_Irecv(buf, 16, MPI_INT, peer, TAG_DATA, MPI_COMM_WORLD, &req));
            CHECK_MPI(MPI_Send(&go, 1, MPI_INT, peer, TAG_DONE, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Recv(&go, 1, MPI_INT, peer, TAG_DONE, MPI_COMM_WORLD, &st));
            CHECK_MPI(MPI_Cancel(&req));
            CHECK_MPI(MPI_Wait(&req, &st));
            flag = 1;
            CHECK_MPI(MPI_Test_cancelled(&st, &flag));
            CHECK(!flag, "a receive that had matched (the sender's Ssend returned) was cancelled");
            CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
            CHECK(count == 16 && st.MPI_SOURCE == peer && st.MPI_TAG == TAG_DATA,
                  "matched receive after Cancel: count %d source %d tag %d", count, st.MPI_SOURCE,
                  st.MPI_TAG);
            for (i = 0; i < 16; i++)
                CHECK(buf[i] == 777 + i, "matched receive after Cancel: element %d is %d", i, buf[i]);
        } else {
            int go = 0, data[16];
            for (i = 0; i < 16; i++)
                data[i] = 777 + i;
            CHECK_MPI(MPI_Recv(&go, 1, MPI_INT, peer, TAG_DONE, MPI_COMM_WORLD, &st));
            CHECK_MPI(MPI_Ssend(data, 16, MPI_INT, peer, TAG_DATA, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Send(&go, 1, MPI_INT, peer, TAG_DONE, MPI_COMM_WORLD));
        }
    }
    return test_end();
}
