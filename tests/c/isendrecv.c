/*
 * isendrecv.c - MPI_Isendrecv and MPI_Isendrecv_replace (and their _c forms).
 *
 * Around the ring, sizes 0, 1, 1000 and 256K ints (past the eager limit): each rank sends to its
 * right and receives from its left with MPI_Isendrecv, completed by Wait, a Test loop, or Waitall
 * with several in flight at once (tags keep them apart); the status says the left neighbour, the
 * tag and the count. MPI_Isendrecv_replace shifts a buffer around the ring until it comes home.
 * MPI_ANY_SOURCE/MPI_ANY_TAG receive; MPI_PROC_NULL on both sides completes at once with the empty
 * source; a request freed before it completes still delivers (checked after a barrier-separated
 * blocking exchange).
 */
#include "stormtest.h"

#include <string.h>

static int rank, size, right, left;

static int val(int src, int seq, int i) { return src * 1000003 + seq * 1009 + i; }

static void check_status(const MPI_Status *st, int src, int tag, int n, const char *what)
{
    int c = -1;
    CHECK(st->MPI_SOURCE == src && st->MPI_TAG == tag, "%s: status source %d tag %d, expected %d %d", what,
          st->MPI_SOURCE, st->MPI_TAG, src, tag);
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &c));
    CHECK(c == n, "%s: count %d, expected %d", what, c, n);
}

int main(int argc, char **argv)
{
    static const int sizes[4] = {0, 1, 1000, 262144};
    int *sb[4], *rb[4];
    MPI_Request rq[4];
    MPI_Status st[4];

    MPI_Init(&argc, &argv);
    test_begin("isendrecv");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    for (int k = 0; k < 4; k++) {
        sb[k] = test_malloc(sizeof(int) * (size_t)(sizes[k] + 1));
        rb[k] = test_malloc(sizeof(int) * (size_t)(sizes[k] + 1));
    }

    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < 4; k++) {
            for (int i = 0; i < sizes[k]; i++) {
                sb[k][i] = val(rank, round * 4 + k, i);
                rb[k][i] = -1;
            }
            if (round == 2 && k % 2)
                CHECK_MPI(MPI_Isendrecv_c(sb[k], sizes[k], MPI_INT, right, 10 + k, rb[k], sizes[k], MPI_INT,
                                          MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rq[k]));
            else
                CHECK_MPI(MPI_Isendrecv(sb[k], sizes[k], MPI_INT, right, 10 + k, rb[k], sizes[k], MPI_INT, left,
                                        10 + k, MPI_COMM_WORLD, &rq[k]));
            if (round == 0) { /* one at a time, by Wait */
                CHECK_MPI(MPI_Wait(&rq[k], &st[k]));
                CHECK(rq[k] == MPI_REQUEST_NULL, "Wait left the request");
            } else if (round == 1) { /* by Test */
                int flag = 0;
                while (!flag)
                    CHECK_MPI(MPI_Test(&rq[k], &flag, &st[k]));
            }
        }
        if (round == 2)
            CHECK_MPI(MPI_Waitall(4, rq, st));
        for (int k = 0; k < 4; k++) {
            check_status(&st[k], left, 10 + k, sizes[k], "Isendrecv");
            for (int i = 0; i < sizes[k]; i++)
                CHECK(rb[k][i] == val(left, round * 4 + k, i), "Isendrecv round %d size %d: element %d is %d",
                      round, sizes[k], i, rb[k][i]);
        }
    }

    /* Replace: shift around the ring until the data is home. */
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < sizes[k]; i++)
            rb[k][i] = val(rank, 77, i);
        for (int step = 0; step < size; step++) {
            if (step % 2)
                CHECK_MPI(MPI_Isendrecv_replace_c(rb[k], sizes[k], MPI_INT, right, 5, left, 5, MPI_COMM_WORLD, &rq[0]));
            else
                CHECK_MPI(MPI_Isendrecv_replace(rb[k], sizes[k], MPI_INT, right, 5, left, 5, MPI_COMM_WORLD, &rq[0]));
            CHECK_MPI(MPI_Wait(&rq[0], &st[0]));
            check_status(&st[0], left, 5, sizes[k], "Isendrecv_replace");
            {
                int from = ((rank - step - 1) % size + size) % size;
                for (int i = 0; i < sizes[k]; i++)
                    CHECK(rb[k][i] == val(from, 77, i), "Isendrecv_replace step %d: element %d is %d", step, i, rb[k][i]);
            }
        }
    }

    /* MPI_PROC_NULL on both sides. */
    CHECK_MPI(MPI_Isendrecv(sb[1], 1, MPI_INT, MPI_PROC_NULL, 1, rb[1], 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &rq[0]));
    CHECK_MPI(MPI_Wait(&rq[0], &st[0]));
    CHECK(st[0].MPI_SOURCE == MPI_PROC_NULL, "PROC_NULL: source %d", st[0].MPI_SOURCE);

    /* Freed before completion: the exchange still happens. */
    sb[2][0] = val(rank, 99, 0);
    rb[2][0] = -1;
    CHECK_MPI(MPI_Isendrecv(sb[2], 1, MPI_INT, right, 50, rb[2], 1, MPI_INT, left, 50, MPI_COMM_WORLD, &rq[0]));
    CHECK_MPI(MPI_Request_free(&rq[0]));
    {
        int token = 0;
        /* A blocking exchange after it on the same pair and tag order: it completes only after
         * the freed one matched, and the barrier lets every rank's freed one finish. */
        CHECK_MPI(MPI_Sendrecv(&rank, 1, MPI_INT, right, 50, &token, 1, MPI_INT, left, 50, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(token == left, "after the freed Isendrecv: token %d", token);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK(rb[2][0] == val(left, 99, 0), "freed Isendrecv delivered %d", rb[2][0]);
    }
    for (int k = 0; k < 4; k++) {
        free(sb[k]);
        free(rb[k]);
    }
    return test_end();
}
