/*
 * idup.c - MPI_Comm_idup and MPI_Comm_idup_with_info.
 *
 * Checked: an idup of MPI_COMM_WORLD, of a split communicator and of an intercommunicator
 * completes (MPI_Wait / MPI_Test loops) into a communicator congruent with its parent (same
 * rank, size, remote size) whose traffic is separate from the parent's; the call does not block:
 * rank 0 calls MPI_Comm_idup and then MPI_Send to rank 1, which receives that message before it
 * calls MPI_Comm_idup itself; several idups in flight at once (of world, of the split, and
 * interleaved with an Iallreduce on the parent) complete into distinct communicators; an idup
 * in flight across a blocking MPI_Comm_dup and MPI_Comm_split of the same parent; the
 * attributes are those of the parent at the call (one set after the call is not copied; the copy
 * callback runs once per idup); MPI_Comm_idup_with_info with an info and with MPI_INFO_NULL; an
 * error handler set on the new handle before the request completes holds after it.
 *
 * usage: idup
 */
#include "stormtest.h"

static int copies;

static int copy_fn(MPI_Comm oldcomm, int keyval, void *extra, void *in, void *out, int *flag)
{
    (void)oldcomm;
    (void)keyval;
    (void)extra;
    copies++;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

/* A communicator made by idup: congruent with its parent, usable, separate from it. */
static void check_dup(MPI_Comm parent, MPI_Comm c, const char *what)
{
    int r1, r2, s1, s2, inter, result, a, b;
    CHECK(c != MPI_COMM_NULL && c != parent, "%s: got MPI_COMM_NULL or the parent", what);
    CHECK_MPI(MPI_Comm_test_inter(parent, &inter));
    CHECK_MPI(MPI_Comm_rank(parent, &r1));
    CHECK_MPI(MPI_Comm_rank(c, &r2));
    CHECK_MPI(MPI_Comm_size(parent, &s1));
    CHECK_MPI(MPI_Comm_size(c, &s2));
    CHECK(r1 == r2 && s1 == s2, "%s: rank/size %d/%d, parent %d/%d", what, r2, s2, r1, s1);
    CHECK_MPI(MPI_Comm_compare(parent, c, &result));
    CHECK(result == MPI_CONGRUENT, "%s: compare with parent = %d, expected MPI_CONGRUENT", what,
          result);
    if (inter) {
        int q1, q2;
        CHECK_MPI(MPI_Comm_remote_size(parent, &q1));
        CHECK_MPI(MPI_Comm_remote_size(c, &q2));
        CHECK(q1 == q2, "%s: remote size %d, parent %d", what, q2, q1);
        /* intercommunicator collective: each group gets the other's sum of ranks */
        a = r2 + 1;
        CHECK_MPI(MPI_Allreduce(&a, &b, 1, MPI_INT, MPI_SUM, c));
        CHECK(b == q1 * (q1 + 1) / 2, "%s: Allreduce gave %d, expected %d", what, b,
              q1 * (q1 + 1) / 2);
        /* point-to-point with the remote rank of the same number, if there is one */
        if (r2 < q1) {
            int x = 1000 + r2, y = -1, z = -1;
            MPI_Request rq[4];
            CHECK_MPI(MPI_Irecv(&y, 1, MPI_INT, r2, 5, c, &rq[0]));
            CHECK_MPI(MPI_Irecv(&z, 1, MPI_INT, r2, 5, parent, &rq[1]));
            CHECK_MPI(MPI_Isend(&x, 1, MPI_INT, r2, 5, parent, &rq[2]));
            a = 2000 + r2;
            CHECK_MPI(MPI_Isend(&a, 1, MPI_INT, r2, 5, c, &rq[3]));
            CHECK_MPI(MPI_Waitall(4, rq, MPI_STATUSES_IGNORE));
            CHECK(y == 2000 + r2 && z == 1000 + r2, "%s: traffic mixed: %d on the dup, %d on the "
                  "parent", what, y, z);
        }
    } else {
        int right = (r1 + 1) % s1, left = (r1 + s1 - 1) % s1, y = -1, z = -1, x1, x2;
        MPI_Request rq[4];
        /* the same tag on parent and dup: each message stays on its communicator */
        x1 = 100 * r1 + 1;
        x2 = 100 * r1 + 2;
        CHECK_MPI(MPI_Irecv(&y, 1, MPI_INT, left, 9, c, &rq[0]));
        CHECK_MPI(MPI_Irecv(&z, 1, MPI_INT, left, 9, parent, &rq[1]));
        CHECK_MPI(MPI_Isend(&x1, 1, MPI_INT, right, 9, parent, &rq[2]));
        CHECK_MPI(MPI_Isend(&x2, 1, MPI_INT, right, 9, c, &rq[3]));
        CHECK_MPI(MPI_Waitall(4, rq, MPI_STATUSES_IGNORE));
        CHECK(y == 100 * left + 2 && z == 100 * left + 1,
              "%s: traffic mixed: %d on the dup, %d on the parent", what, y, z);
        a = r1;
        CHECK_MPI(MPI_Allreduce(&a, &b, 1, MPI_INT, MPI_SUM, c));
        CHECK(b == s1 * (s1 - 1) / 2, "%s: Allreduce gave %d", what, b);
    }
}

static MPI_Comm idup_wait(MPI_Comm parent, int use_test)
{
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Request rq;
    MPI_Errhandler eh;
    CHECK_MPI(MPI_Comm_idup(parent, &c, &rq));
    CHECK(rq != MPI_REQUEST_NULL, "MPI_Comm_idup gave MPI_REQUEST_NULL");
    /* As mpi4py does for every new communicator: the handler is set on the new handle before
       the request completes, and holds after it. */
    CHECK_MPI(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_get_errhandler(c, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "the pending communicator's handler did not read back");
    if (use_test) {
        int flag = 0;
        while (!flag)
            CHECK_MPI(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE));
    } else
        CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Comm_get_errhandler(c, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "the handler set while the idup was pending was lost");
    CHECK_MPI(MPI_Errhandler_free(&eh));
    return c;
}

int main(int argc, char **argv)
{
    int rank, size, i, key, flag, *got, va = 11, vb = 22, sum;
    MPI_Comm c, half, local, inter, many[6];
    MPI_Request rq[8];
    MPI_Info info;

    MPI_Init(&argc, &argv);
    test_begin("idup");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 2, "needs at least 2 processes");

    /* of world, waited and tested */
    c = idup_wait(MPI_COMM_WORLD, 0);
    check_dup(MPI_COMM_WORLD, c, "idup(world)");
    CHECK_MPI(MPI_Comm_free(&c));
    c = idup_wait(MPI_COMM_WORLD, 1);
    check_dup(MPI_COMM_WORLD, c, "idup(world) with MPI_Test");
    CHECK_MPI(MPI_Comm_free(&c));

    /* of a split communicator */
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half));
    c = idup_wait(half, 0);
    check_dup(half, c, "idup(split)");
    CHECK_MPI(MPI_Comm_free(&c));

    /* of an intercommunicator: even ranks and odd ranks */
    CHECK_MPI(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 == 0 ? 1 : 0, 7, &inter));
    c = idup_wait(inter, 0);
    check_dup(inter, c, "idup(intercommunicator)");
    CHECK_MPI(MPI_Comm_free(&c));

    /* the call does not block: rank 1 receives rank 0's message before it calls idup */
    {
        int msg = 0;
        if (rank == 0) {
            CHECK_MPI(MPI_Comm_idup(MPI_COMM_WORLD, &c, &rq[0]));
            msg = 4242;
            CHECK_MPI(MPI_Send(&msg, 1, MPI_INT, 1, 3, MPI_COMM_WORLD));
        } else if (rank == 1) {
            CHECK_MPI(MPI_Recv(&msg, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(msg == 4242, "overlap: received %d", msg);
            CHECK_MPI(MPI_Comm_idup(MPI_COMM_WORLD, &c, &rq[0]));
        } else
            CHECK_MPI(MPI_Comm_idup(MPI_COMM_WORLD, &c, &rq[0]));
        CHECK_MPI(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
        check_dup(MPI_COMM_WORLD, c, "idup(world) overlapping a send");
        CHECK_MPI(MPI_Comm_free(&c));
    }

    /* several in flight, with a collective on the parent between them */
    {
        int a = rank, b = -1;
        CHECK_MPI(MPI_Comm_idup(MPI_COMM_WORLD, &many[0], &rq[0]));
        CHECK_MPI(MPI_Comm_idup(half, &many[1], &rq[1]));
        CHECK_MPI(MPI_Iallreduce(&a, &b, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq[2]));
        CHECK_MPI(MPI_Comm_idup(MPI_COMM_WORLD, &many[2], &rq[3]));
        CHECK_MPI(MPI_Comm_idup(inter, &many[3], &rq[4]));
        CHECK_MPI(MPI_Comm_idup(MPI_COMM_WORLD, &many[4], &rq[5]));
        CHECK_MPI(MPI_Comm_idup(half, &many[5], &rq[6]));
        CHECK_MPI(MPI_Waitall(7, rq, MPI_STATUSES_IGNORE));
        CHECK(b == size * (size - 1) / 2, "Iallreduce among idups gave %d", b);
        check_dup(MPI_COMM_WORLD, many[0], "idup(world) #1 of several");
        check_dup(half, many[1], "idup(split) #1 of several");
        check_dup(MPI_COMM_WORLD, many[2], "idup(world) #2 of several");
        check_dup(inter, many[3], "idup(intercommunicator) of several");
        check_dup(MPI_COMM_WORLD, many[4], "idup(world) #3 of several");
        check_dup(half, many[5], "idup(split) #2 of several");
        for (i = 0; i < 6; i++) {
            int j;
            for (j = 0; j < i; j++)
                CHECK(many[i] != many[j], "idups %d and %d gave the same handle", j, i);
        }
        /* the three world dups keep their traffic apart: tag 1 on each, received in reverse */
        {
            int right = (rank + 1) % size, left = (rank + size - 1) % size, x[3], y[3];
            MPI_Comm w[3];
            w[0] = many[0];
            w[1] = many[2];
            w[2] = many[4];
            for (i = 0; i < 3; i++)
                x[i] = 10 * rank + i;
            for (i = 2; i >= 0; i--)
                CHECK_MPI(MPI_Irecv(&y[i], 1, MPI_INT, left, 1, w[i], &rq[i]));
            for (i = 0; i < 3; i++)
                CHECK_MPI(MPI_Send(&x[i], 1, MPI_INT, right, 1, w[i]));
            CHECK_MPI(MPI_Waitall(3, rq, MPI_STATUSES_IGNORE));
            for (i = 0; i < 3; i++)
                CHECK(y[i] == 10 * left + i, "world idup %d received %d, expected %d", i, y[i],
                      10 * left + i);
        }
        for (i = 0; i < 6; i++)
            CHECK_MPI(MPI_Comm_free(&many[i]));
    }

    /* in flight across blocking constructions on the same parent */
    {
        MPI_Comm d, sp;
        CHECK_MPI(MPI_Comm_idup(MPI_COMM_WORLD, &c, &rq[0]));
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &d));
        CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank % 3, -rank, &sp));
        CHECK_MPI(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
        check_dup(MPI_COMM_WORLD, c, "idup(world) across a dup and a split");
        check_dup(MPI_COMM_WORLD, d, "dup(world) while an idup was in flight");
        CHECK(c != d, "idup and dup gave the same handle");
        CHECK_MPI(MPI_Comm_free(&sp));
        CHECK_MPI(MPI_Comm_free(&d));
        CHECK_MPI(MPI_Comm_free(&c));
    }

    /* attributes: those of the parent at the call */
    CHECK_MPI(MPI_Comm_create_keyval(copy_fn, MPI_COMM_NULL_DELETE_FN, &key, NULL));
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &local));
    CHECK_MPI(MPI_Comm_set_attr(local, key, &va));
    copies = 0;
    CHECK_MPI(MPI_Comm_idup(local, &c, &rq[0]));
    CHECK_MPI(MPI_Comm_set_attr(local, key, &vb));
    CHECK_MPI(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
    CHECK(copies == 1, "the copy callback ran %d times for one idup", copies);
    CHECK_MPI(MPI_Comm_get_attr(c, key, &got, &flag));
    CHECK(flag && got == &va, "idup's attribute: flag %d, %s", flag,
          got == &vb ? "the value set after the call" : "not the value at the call");
    CHECK_MPI(MPI_Comm_get_attr(local, key, &got, &flag));
    CHECK(flag && got == &vb, "the parent's attribute changed by the idup");
    CHECK_MPI(MPI_Comm_free(&c));
    CHECK_MPI(MPI_Comm_free(&local));
    CHECK_MPI(MPI_Comm_free_keyval(&key));

    /* with info */
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "mpi_assert_no_any_tag", "true"));
    CHECK_MPI(MPI_Comm_idup_with_info(MPI_COMM_WORLD, info, &c, &rq[0]));
    CHECK_MPI(MPI_Info_free(&info));
    CHECK_MPI(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
    check_dup(MPI_COMM_WORLD, c, "idup_with_info(world)");
    CHECK_MPI(MPI_Comm_free(&c));
    CHECK_MPI(MPI_Comm_idup_with_info(half, MPI_INFO_NULL, &c, &rq[0]));
    CHECK_MPI(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
    check_dup(half, c, "idup_with_info(split, MPI_INFO_NULL)");
    CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, c));
    CHECK_MPI(MPI_Comm_free(&c));

    CHECK_MPI(MPI_Comm_free(&inter));
    CHECK_MPI(MPI_Comm_free(&half));
    return test_end();
}
