/*
 * cart_map_zero.c - MPI_Cart_map with a zero in dims (rsmpi's cartesian_map example: dims
 * {2, 0}) gives MPI_UNDEFINED on every rank, since the grid has no processes; with positive
 * dims, ranks inside the grid keep their rank and the others get MPI_UNDEFINED (issue 27).
 * With --own-rank-outside a process outside the grid may also get its own rank (Open MPI 4.1.4
 * gives every process its own rank; see run-reference.sh).
 */
#include "stormtest.h"

static int zero_ok(int newrank, int rank, int own_rank_ok)
{
    if (newrank == MPI_UNDEFINED)
        return 1;
    if (own_rank_ok && newrank == rank) {
        if (rank == 0)
            printf("note: MPI_Cart_map gave a process outside the grid its own rank\n");
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int rank, size, newrank, rc;
    int own_rank_ok = argc > 1 && strcmp(argv[1], "--own-rank-outside") == 0;
    int dims[2] = {2, 0}, periods[2] = {0, 0}, one[1];
    MPI_Init(&argc, &argv);
    test_begin("cart_map_zero");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    newrank = -12345;
    rc = MPI_Cart_map(MPI_COMM_WORLD, 2, dims, periods, &newrank);
    CHECK(rc == MPI_SUCCESS, "MPI_Cart_map(dims {2, 0}) returned %d", rc);
    CHECK(zero_ok(newrank, rank, own_rank_ok),
          "MPI_Cart_map(dims {2, 0}) gave rank %d, not MPI_UNDEFINED", newrank);

    dims[0] = 0;
    dims[1] = 3;
    newrank = -12345;
    CHECK_MPI(MPI_Cart_map(MPI_COMM_WORLD, 2, dims, periods, &newrank));
    CHECK(zero_ok(newrank, rank, own_rank_ok), "MPI_Cart_map(dims {0, 3}) gave rank %d",
          newrank);

    one[0] = size > 1 ? size - 1 : 1;
    newrank = -12345;
    CHECK_MPI(MPI_Cart_map(MPI_COMM_WORLD, 1, one, periods, &newrank));
    if (rank < one[0])
        CHECK(newrank == rank, "MPI_Cart_map(dims {%d}) gave rank %d to rank %d", one[0],
              newrank, rank);
    else
        CHECK(zero_ok(newrank, rank, own_rank_ok), "MPI_Cart_map(dims {%d}) gave rank %d to rank %d",
              one[0], newrank, rank);
    return test_end();
}
