/*
 * get_address.c - MPI_Get_address and the struct datatypes built from it.
 *
 * Checked: the difference of two fields' addresses is their offset (MPI_Aint_diff too); the
 * address of an array element moves by the element size; a struct type whose displacements
 * come from MPI_Get_address (relative to the struct's start) carries a C struct to the next rank
 * field by field; a type with absolute addresses sends from MPI_BOTTOM.
 *
 * usage: get_address
 */
#include "stormtest.h"

#include <stddef.h>

typedef struct {
    char c;
    double d;
    int i[3];
    short s;
} rec;

int main(int argc, char **argv)
{
    int rank, size, k;
    rec r, got[2];
    MPI_Aint base, a_c, a_d, a_i, a_s, a0, a1, disp[4];
    int blens[4] = {1, 1, 3, 1};
    MPI_Datatype types[4] = {MPI_CHAR, MPI_DOUBLE, MPI_INT, MPI_SHORT}, t, tr, tabs;
    MPI_Status st;

    MPI_Init(&argc, &argv);
    test_begin("get_address");
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));

    CHECK_MPI(MPI_Get_address(&r, &base));
    CHECK_MPI(MPI_Get_address(&r.c, &a_c));
    CHECK_MPI(MPI_Get_address(&r.d, &a_d));
    CHECK_MPI(MPI_Get_address(&r.i[0], &a_i));
    CHECK_MPI(MPI_Get_address(&r.s, &a_s));
    CHECK(base != 0, "the address of a stack variable is 0");
    CHECK(a_c - base == (MPI_Aint)offsetof(rec, c) && a_d - base == (MPI_Aint)offsetof(rec, d) &&
              a_i - base == (MPI_Aint)offsetof(rec, i) && a_s - base == (MPI_Aint)offsetof(rec, s),
          "field offsets %ld %ld %ld %ld, expected %ld %ld %ld %ld", (long)(a_c - base),
          (long)(a_d - base), (long)(a_i - base), (long)(a_s - base), (long)offsetof(rec, c),
          (long)offsetof(rec, d), (long)offsetof(rec, i), (long)offsetof(rec, s));
    CHECK(MPI_Aint_diff(a_s, base) == (MPI_Aint)offsetof(rec, s), "MPI_Aint_diff");
    CHECK_MPI(MPI_Get_address(&got[0], &a0));
    CHECK_MPI(MPI_Get_address(&got[1], &a1));
    CHECK(a1 - a0 == (MPI_Aint)sizeof(rec), "array elements %ld apart, expected %ld",
          (long)(a1 - a0), (long)sizeof(rec));

    /* relative displacements, resized to the C struct's extent; two records at once */
    disp[0] = a_c - base;
    disp[1] = a_d - base;
    disp[2] = a_i - base;
    disp[3] = a_s - base;
    CHECK_MPI(MPI_Type_create_struct(4, blens, disp, types, &t));
    CHECK_MPI(MPI_Type_create_resized(t, 0, (MPI_Aint)sizeof(rec), &tr));
    CHECK_MPI(MPI_Type_commit(&tr));
    /* absolute addresses: the same record sent from MPI_BOTTOM */
    disp[0] = a_c;
    disp[1] = a_d;
    disp[2] = a_i;
    disp[3] = a_s;
    CHECK_MPI(MPI_Type_create_struct(4, blens, disp, types, &tabs));
    CHECK_MPI(MPI_Type_commit(&tabs));

    memset(&r, 0, sizeof r);
    r.c = (char)('a' + rank);
    r.d = 1.5 * rank + 0.25;
    for (k = 0; k < 3; k++)
        r.i[k] = 100 * rank + k;
    r.s = (short)(7 * rank);
    {
        rec two[2];
        int to = (rank + 1) % size, from = (rank + size - 1) % size;
        two[0] = r;
        two[1] = r;
        two[1].s = (short)(two[1].s + 1);
        memset(got, 0, sizeof got);
        CHECK_MPI(MPI_Sendrecv(two, 2, tr, to, 1, got, 2, tr, from, 1, MPI_COMM_WORLD, &st));
        for (k = 0; k < 2; k++) {
            CHECK(got[k].c == (char)('a' + from) && got[k].d == 1.5 * from + 0.25 &&
                      got[k].i[0] == 100 * from && got[k].i[2] == 100 * from + 2 &&
                      got[k].s == (short)(7 * from + k),
                  "record %d from %d: c=%d d=%g i=%d,%d s=%d", k, from, got[k].c, got[k].d,
                  got[k].i[0], got[k].i[2], got[k].s);
        }
        /* from MPI_BOTTOM with the absolute type into a relative receive */
        memset(got, 0, sizeof got);
        CHECK_MPI(MPI_Sendrecv(MPI_BOTTOM, 1, tabs, to, 2, got, 1, tr, from, 2, MPI_COMM_WORLD,
                               &st));
        CHECK(got[0].c == (char)('a' + from) && got[0].d == 1.5 * from + 0.25 &&
                  got[0].i[1] == 100 * from + 1 && got[0].s == (short)(7 * from),
              "MPI_BOTTOM record from %d: c=%d d=%g i=%d s=%d", from, got[0].c, got[0].d,
              got[0].i[1], got[0].s);
    }
    CHECK_MPI(MPI_Type_free(&t));
    CHECK_MPI(MPI_Type_free(&tr));
    CHECK_MPI(MPI_Type_free(&tabs));
    return test_end();
}
