/*
 * create_group_empty.c - MPI_Comm_create_group with MPI_GROUP_EMPTY (and with an empty group
 * made by MPI_Group_incl) returns MPI_SUCCESS and MPI_COMM_NULL, as the standard says, on world
 * and on a dup, with every rank calling it; a process outside a non-empty group that calls it
 * alone gets MPI_COMM_NULL too (rsmpi's split example) while the member makes a communicator of
 * one; a create_group of the whole group works before them (issue 27).
 */
#include "stormtest.h"

static void expect_null(MPI_Comm comm, MPI_Group g, int tag, const char *what)
{
    MPI_Comm c = MPI_COMM_WORLD;
    int rc = MPI_Comm_create_group(comm, g, tag, &c);
    CHECK(rc == MPI_SUCCESS, "MPI_Comm_create_group(%s) returned %d", what, rc);
    CHECK(c == MPI_COMM_NULL, "MPI_Comm_create_group(%s) did not give MPI_COMM_NULL", what);
}

int main(int argc, char **argv)
{
    MPI_Comm dup, c;
    MPI_Group world, empty;
    int size, rank, n = -1;
    MPI_Init(&argc, &argv);
    test_begin("create_group_empty");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);

    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK_MPI(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));

    /* the whole group makes a communicator (on world: MPICH 4.0.2 crashes in a create_group of
       members on a dup) */
    CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, world, 7, &c));
    CHECK(c != MPI_COMM_NULL, "MPI_Comm_create_group(world group) gave MPI_COMM_NULL");
    CHECK_MPI(MPI_Comm_size(c, &n));
    CHECK(n == size, "created communicator has size %d, expected %d", n, size);
    CHECK_MPI(MPI_Comm_free(&c));

    expect_null(MPI_COMM_WORLD, MPI_GROUP_EMPTY, 0, "world, MPI_GROUP_EMPTY");
    CHECK_MPI(MPI_Group_incl(world, 0, NULL, &empty));
    CHECK_MPI(MPI_Group_size(empty, &n));
    CHECK(n == 0, "MPI_Group_incl of no ranks has size %d", n);
    expect_null(dup, empty, 5, "dup, empty group from MPI_Group_incl");
    expect_null(dup, MPI_GROUP_EMPTY, 6, "dup, MPI_GROUP_EMPTY");

    /* outside the group: a local call giving MPI_COMM_NULL, while the group's one member
       makes its own communicator of one */
    {
        MPI_Group last;
        int last_rank = size - 1;
        CHECK_MPI(MPI_Group_incl(world, 1, &last_rank, &last));
        if (rank != last_rank) {
            expect_null(MPI_COMM_WORLD, last, 8, "world, a group without the caller");
        } else {
            CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, last, 8, &c));
            CHECK(c != MPI_COMM_NULL, "MPI_Comm_create_group(own rank) gave MPI_COMM_NULL");
            CHECK_MPI(MPI_Comm_size(c, &n));
            CHECK(n == 1, "communicator of the last rank has size %d", n);
            CHECK_MPI(MPI_Comm_free(&c));
        }
        CHECK_MPI(MPI_Group_free(&last));
    }

    if (empty != MPI_GROUP_EMPTY)
        CHECK_MPI(MPI_Group_free(&empty));
    CHECK_MPI(MPI_Group_free(&world));
    CHECK_MPI(MPI_Comm_free(&dup));
    return test_end();
}
