/*
 * finalize_attrs.c - MPI_Finalize runs the delete callbacks of the attributes still set on
 * MPI_COMM_SELF and on MPI_COMM_WORLD, MPI_COMM_SELF's first (the standard's order; rsmpi's
 * attributes example relies on it). The callbacks record the order; it is checked after
 * MPI_Finalize, so this program prints its OK line itself (issue 27).
 */
#include "stormtest.h"

static char order[8];
static int calls;

static int record(MPI_Comm comm, int keyval, void *value, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)extra;
    if (calls < (int)sizeof order - 1)
        order[calls] = *(const char *)value;
    calls++;
    return MPI_SUCCESS;
}

int main(int argc, char **argv)
{
    static const char world_value = 'W', self_value = 'S';
    int kw, ks, rank, flag = 0;
    MPI_Init(&argc, &argv);
    test_begin("finalize_attrs");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, record, &kw, NULL));
    CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, record, &ks, NULL));
    /* world's is set first, so a reverse-setting order alone would run it last too: set a
       second one on world after SELF's to tell "SELF's first" from "latest first" */
    CHECK_MPI(MPI_Comm_set_attr(MPI_COMM_WORLD, kw, (void *)&world_value));
    CHECK_MPI(MPI_Comm_set_attr(MPI_COMM_SELF, ks, (void *)&self_value));
    CHECK_MPI(MPI_Comm_free_keyval(&kw));
    CHECK_MPI(MPI_Comm_free_keyval(&ks));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(calls == 0, "%d delete callbacks ran before MPI_Finalize", calls);
    MPI_Finalize();
    /* MPI is finalized: report with plain stdio and the exit status */
    if (calls != 2 || order[0] != 'S' || order[1] != 'W') {
        fprintf(stderr, "FAIL finalize_attrs: rank %d: %d delete callbacks ran at MPI_Finalize "
                        "in order \"%s\", expected 2 in order \"SW\"\n", rank, calls, order);
        return 1;
    }
    MPI_Finalized(&flag);
    if (rank == 0)
        printf("OK finalize_attrs\n");
    return 0;
}
