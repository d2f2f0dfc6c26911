/*
 * sessions_only.c - a program that never calls MPI_Init: one session brings MPI up, its
 * communicator from mpi://WORLD carries a barrier, a broadcast and messages, and its
 * MPI_Session_finalize ends MPI (MPI_Initialized and MPI_Finalized stay false throughout, as
 * they speak of the world model only).
 */
#include "stormtest.h"

int main(void)
{
    MPI_Session s;
    MPI_Group g;
    MPI_Comm c;
    int flag = -1, rank, size, v, i;
    stormtest_name = "sessions_only";
    CHECK_MPI(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &s));
    CHECK_MPI(MPI_Group_from_session_pset(s, "mpi://WORLD", &g));
    CHECK_MPI(MPI_Comm_create_from_group(g, "sessions_only", MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL,
                                         &c));
    CHECK_MPI(MPI_Group_free(&g));
    CHECK_MPI(MPI_Comm_rank(c, &rank));
    CHECK_MPI(MPI_Comm_size(c, &size));
    stormtest_rank = rank;
    CHECK_MPI(MPI_Barrier(c));
    v = rank == 0 ? 4242 : -1;
    CHECK_MPI(MPI_Bcast(&v, 1, MPI_INT, 0, c));
    CHECK(v == 4242, "broadcast gave %d", v);
    for (i = 0; i < 10; i++) {
        int out = rank * 1000 + i, in = -1, from = (rank + size - 1) % size;
        CHECK_MPI(MPI_Sendrecv(&out, 1, MPI_INT, (rank + 1) % size, i, &in, 1, MPI_INT, from, i, c,
                               MPI_STATUS_IGNORE));
        CHECK(in == from * 1000 + i, "message %d is %d", i, in);
    }
    CHECK_MPI(MPI_Initialized(&flag));
    CHECK(flag == 0, "MPI_Initialized is true without MPI_Init");
    CHECK_MPI(MPI_Comm_free(&c));
    CHECK_MPI(MPI_Session_finalize(&s));
    CHECK_MPI(MPI_Finalized(&flag));
    CHECK(flag == 0, "MPI_Finalized is true without MPI_Init");
    if (rank == 0) {
        printf("OK sessions_only\n");
        fflush(stdout);
    }
    return 0;
}
