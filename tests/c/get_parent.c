/*
 * get_parent.c - MPI_Comm_get_parent in a job that was not spawned returns MPI_SUCCESS and
 * MPI_COMM_NULL, before and after other communicator work, on every rank (issue 27: rsmpi calls
 * it when its Universe is dropped).
 */
#include "stormtest.h"

static void expect_no_parent(const char *when)
{
    MPI_Comm parent = MPI_COMM_WORLD;
    int rc = MPI_Comm_get_parent(&parent);
    CHECK(rc == MPI_SUCCESS, "MPI_Comm_get_parent %s returned %d", when, rc);
    CHECK(parent == MPI_COMM_NULL, "MPI_Comm_get_parent %s did not give MPI_COMM_NULL", when);
}

int main(int argc, char **argv)
{
    MPI_Comm dup;
    MPI_Init(&argc, &argv);
    test_begin("get_parent");
    /* an error must come back as a code, not end the job, so that the check above names it */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    expect_no_parent("at start");
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    expect_no_parent("after a dup");
    CHECK_MPI(MPI_Comm_free(&dup));
    expect_no_parent("twice");
    return test_end();
}
