/*
 * dup.c - MPI_Comm_dup, MPI_Comm_compare, MPI_Comm_free, and the separation of traffic between
 * a communicator and its duplicate.
 *
 * Checked: a dup has the same rank and size; compare(world, world) is MPI_IDENT,
 * compare(world, dup) and compare(dup, dup-of-dup) are MPI_CONGRUENT, compare(world, self) is
 * MPI_UNEQUAL when size > 1; the dup inherits the error handler; Comm_free sets the handle to
 * MPI_COMM_NULL.  Traffic: a message sent on the dup with the same tag as one on world is never
 * received on world — a probe on world does not see it even after it has arrived on the dup, a
 * wildcard receive on world gets the world message, and the dup message is then received on the
 * dup.  Collectives on world and on dups interleave without mixing.  Finally a number of
 * dup/free cycles (communicator identifiers must be recycled) with a message on each.
 *
 * usage: dup [cycles]   (default 16; use thousands to exhaust a context-id pool)
 */
#include "stormtest.h"


int main(int argc, char **argv)
{
    int rank, size, left, right, r2, s2, result, i, a, b, flag, cycles = 16;
    MPI_Comm dup, dup2;
    MPI_Errhandler eh;
    MPI_Status st;

    MPI_Init(&argc, &argv);
    test_begin("dup");
    if (argc > 1)
        cycles = atoi(argv[1]);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;

    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK(dup != MPI_COMM_NULL && dup != MPI_COMM_WORLD, "Comm_dup gave MPI_COMM_NULL or world");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    CHECK_MPI(MPI_Comm_get_errhandler(dup, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "the dup did not inherit MPI_ERRORS_RETURN from its parent");
    CHECK_MPI(MPI_Errhandler_free(&eh));
    CHECK_MPI(MPI_Comm_set_errhandler(dup, MPI_ERRORS_ARE_FATAL));

    CHECK_MPI(MPI_Comm_rank(dup, &r2));
    CHECK_MPI(MPI_Comm_size(dup, &s2));
    CHECK(r2 == rank && s2 == size, "dup rank/size %d/%d, world %d/%d", r2, s2, rank, size);
    CHECK_MPI(MPI_Comm_dup(dup, &dup2));

    CHECK_MPI(MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &result));
    CHECK(result == MPI_IDENT, "compare(world, world) = %d, expected MPI_IDENT", result);
    CHECK_MPI(MPI_Comm_compare(dup, dup, &result));
    CHECK(result == MPI_IDENT, "compare(dup, dup) = %d, expected MPI_IDENT", result);
    CHECK_MPI(MPI_Comm_compare(MPI_COMM_WORLD, dup, &result));
    CHECK(result == MPI_CONGRUENT, "compare(world, dup) = %d, expected MPI_CONGRUENT", result);
    CHECK_MPI(MPI_Comm_compare(dup2, dup, &result));
    CHECK(result == MPI_CONGRUENT, "compare(dup2, dup) = %d, expected MPI_CONGRUENT", result);
    CHECK_MPI(MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_SELF, &result));
    if (size > 1)
        CHECK(result == MPI_UNEQUAL, "compare(world, self) = %d, expected MPI_UNEQUAL", result);
    else
        CHECK(result == MPI_CONGRUENT, "compare(world, self) with 1 rank = %d", result);

    /* Same tag on world and dup.  The dup message goes first and has surely arrived (probed on
     * the dup) before the world one is even sent. */
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    a = 1000 + rank;
    CHECK_MPI(MPI_Send(&a, 1, MPI_INT, right, 7, dup));
    CHECK_MPI(MPI_Probe(left, 7, dup, &st));
    flag = 1;
    CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
    CHECK(!flag, "Iprobe on world sees a message (source %d tag %d) that was sent on a dup",
          st.MPI_SOURCE, st.MPI_TAG);
    CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, dup2, &flag, &st));
    CHECK(!flag, "Iprobe on dup2 sees a message sent on dup");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* nobody sends on world before all probed */
    a = 2000 + rank;
    CHECK_MPI(MPI_Send(&a, 1, MPI_INT, right, 7, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Recv(&b, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
    CHECK(b == 2000 + left, "wildcard receive on world got %d (the dup message is %d)", b, 1000 + left);
    CHECK_MPI(MPI_Recv(&b, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, dup, &st));
    CHECK(b == 1000 + left && st.MPI_TAG == 7, "receive on dup got %d tag %d", b, st.MPI_TAG);

    /* pre-posted receives on both, sends in the opposite order */
    {
        MPI_Request rq[4];
        int rw = -1, rd = -1, sw = 3000 + rank, sd = 4000 + rank;
        CHECK_MPI(MPI_Irecv(&rw, 1, MPI_INT, left, 9, MPI_COMM_WORLD, &rq[0]));
        CHECK_MPI(MPI_Irecv(&rd, 1, MPI_INT, left, 9, dup2, &rq[1]));
        CHECK_MPI(MPI_Isend(&sd, 1, MPI_INT, right, 9, dup2, &rq[2]));
        CHECK_MPI(MPI_Isend(&sw, 1, MPI_INT, right, 9, MPI_COMM_WORLD, &rq[3]));
        CHECK_MPI(MPI_Waitall(4, rq, MPI_STATUSES_IGNORE));
        CHECK(rw == 3000 + left && rd == 4000 + left, "pre-posted: world got %d, dup2 got %d", rw, rd);
    }

    /* interleaved collectives */
    for (i = 0; i < 6; i++) {
        int x = rank + i, y = -1, z = -1, root = i % size;
        int bw = rank == root ? 50 + i : -1, bd = rank == (root + 1) % size ? 70 + i : -1;
        CHECK_MPI(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, dup));
        CHECK_MPI(MPI_Allreduce(&x, &z, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Bcast(&bd, 1, MPI_INT, (root + 1) % size, dup2));
        CHECK_MPI(MPI_Bcast(&bw, 1, MPI_INT, root, MPI_COMM_WORLD));
        CHECK(y == size * (size - 1) / 2 + size * i && z == size - 1 + i && bw == 50 + i && bd == 70 + i,
              "collectives round %d: sum %d max %d bcast %d/%d", i, y, z, bw, bd);
        CHECK_MPI(MPI_Barrier(i % 2 ? dup : dup2));
    }

    CHECK_MPI(MPI_Comm_free(&dup2));
    CHECK(dup2 == MPI_COMM_NULL, "Comm_free did not set the handle to MPI_COMM_NULL");
    CHECK_MPI(MPI_Comm_free(&dup));
    CHECK(dup == MPI_COMM_NULL, "Comm_free did not set the handle to MPI_COMM_NULL");

    /* many dup/free cycles, traffic on each */
    for (i = 0; i < cycles; i++) {
        MPI_Comm c;
        int v = i * 100 + rank, w = -1;
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
        CHECK_MPI(MPI_Sendrecv(&v, 1, MPI_INT, right, i, &w, 1, MPI_INT, left, i, c, &st));
        CHECK(w == i * 100 + left, "dup cycle %d: got %d", i, w);
        if (i % 2)
            CHECK_MPI(MPI_Comm_disconnect(&c));
        else
            CHECK_MPI(MPI_Comm_free(&c));
        CHECK(c == MPI_COMM_NULL, "cycle %d left the handle set", i);
    }
    {
        MPI_Comm c = MPI_COMM_NULL;
        int cls = -1;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Error_class(MPI_Comm_disconnect(&c), &cls);
        CHECK(cls == MPI_ERR_COMM, "MPI_Comm_disconnect(MPI_COMM_NULL) gave class %d", cls);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    }
    return test_end();
}
