/*
 * split_type.c - MPI_Comm_split_type with every split type.
 *
 * Checked (all ranks on one node, as every launch of these tests is): MPI_COMM_TYPE_SHARED gives
 * all ranks, ranked by key (reversed here); MPI_COMM_TYPE_HW_GUIDED with mpi_hw_resource_type
 * "mpi_shared_memory" gives the same group; with a resource type no MPI knows, or no info,
 * MPI_COMM_NULL;
 * MPI_COMM_TYPE_HW_UNGUIDED gives MPI_COMM_NULL or a strict subset of the parent (a working
 * communicator: an Allreduce counts its members); MPICH's MPIX_COMM_TYPE_NEIGHBORHOOD, where the
 * header has it, MPI_COMM_NULL or a working communicator; MPI_UNDEFINED, MPI_COMM_NULL.
 *
 * usage: split_type
 */
#include "stormtest.h"

static void check_sub(MPI_Comm c, int parent_size, int strict, const char *what)
{
    int n, one = 1, sum = 0;
    if (c == MPI_COMM_NULL)
        return;
    CHECK_MPI(MPI_Comm_size(c, &n));
    CHECK(n >= 1 && n <= parent_size && (!strict || n < parent_size),
          "%s: %d members of a parent of %d", what, n, parent_size);
    CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c));
    CHECK(sum == n, "%s: Allreduce counted %d of %d", what, sum, n);
    CHECK_MPI(MPI_Comm_free(&c));
}

int main(int argc, char **argv)
{
    int rank, size, r, n, result;
    MPI_Comm shared, c;
    MPI_Group gs, gc;

    MPI_Init(&argc, &argv);
    test_begin("split_type");
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));

    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, -rank, MPI_INFO_NULL,
                                  &shared));
    CHECK(shared != MPI_COMM_NULL, "SHARED gave MPI_COMM_NULL");
    CHECK_MPI(MPI_Comm_size(shared, &n));
    CHECK_MPI(MPI_Comm_rank(shared, &r));
    CHECK(n == size && r == size - 1 - rank, "SHARED: size %d rank %d, expected %d %d", n, r,
          size, size - 1 - rank);

#if MPI_VERSION >= 4
    {
        MPI_Info info;
        CHECK_MPI(MPI_Info_create(&info));
        CHECK_MPI(MPI_Info_set(info, "mpi_hw_resource_type", "mpi_shared_memory"));
        CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, -rank, info, &c));
        CHECK(c != MPI_COMM_NULL, "HW_GUIDED mpi_shared_memory gave MPI_COMM_NULL");
        CHECK_MPI(MPI_Comm_group(shared, &gs));
        CHECK_MPI(MPI_Comm_group(c, &gc));
        CHECK_MPI(MPI_Group_compare(gs, gc, &result));
        CHECK(result == MPI_IDENT, "HW_GUIDED mpi_shared_memory: group %d, not SHARED's", result);
        CHECK_MPI(MPI_Group_free(&gs));
        CHECK_MPI(MPI_Group_free(&gc));
        CHECK_MPI(MPI_Comm_free(&c));

        CHECK_MPI(MPI_Info_set(info, "mpi_hw_resource_type", "stormpi_no_such_resource"));
        CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, info, &c));
        CHECK(c == MPI_COMM_NULL, "HW_GUIDED with an unknown resource type gave a communicator");
        CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, MPI_INFO_NULL, &c));
        CHECK(c == MPI_COMM_NULL, "HW_GUIDED without info gave a communicator");
        CHECK_MPI(MPI_Info_free(&info));

        CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_UNGUIDED, rank,
                                      MPI_INFO_NULL, &c));
        check_sub(c, size, 1, "HW_UNGUIDED");
        /* and of the shared communicator */
        CHECK_MPI(MPI_Comm_split_type(shared, MPI_COMM_TYPE_HW_UNGUIDED, rank, MPI_INFO_NULL, &c));
        check_sub(c, size, 1, "HW_UNGUIDED of SHARED");
    }
#else
    (void)gs, (void)gc, (void)result;
    if (rank == 0)
        printf("note: MPI_COMM_TYPE_HW_GUIDED/UNGUIDED are MPI 4, this library MPI %d: skipped\n",
               MPI_VERSION);
#endif
#ifdef MPIX_COMM_TYPE_NEIGHBORHOOD
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPIX_COMM_TYPE_NEIGHBORHOOD, rank,
                                  MPI_INFO_NULL, &c));
    check_sub(c, size, 0, "MPIX_COMM_TYPE_NEIGHBORHOOD");
#endif
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_UNDEFINED, rank, MPI_INFO_NULL, &c));
    CHECK(c == MPI_COMM_NULL, "MPI_UNDEFINED gave a communicator");

    CHECK_MPI(MPI_Comm_free(&shared));
    return test_end();
}
