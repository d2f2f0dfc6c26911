/*
 * type_names.c - MPI_Type_get_name of every predefined datatype.
 *
 * Checked: each predefined datatype of C and Fortran (and the C++ ones MPICH's header has) is
 * named as the standard names it; where two names are one handle (MPICH's ABI: MPI_C_COMPLEX and
 * MPI_C_FLOAT_COMPLEX, MPI_LONG_LONG_INT and MPI_LONG_LONG), the handle carries the name listed
 * first here, which is the one MPICH reports. A name set with MPI_Type_set_name on a duplicate
 * does not rename the predefined type.
 *
 * usage: type_names
 */
#include "stormtest.h"

typedef struct {
    MPI_Datatype t;
    const char *name;
} entry;

#define T(x) {x, #x}

int main(int argc, char **argv)
{
    /* canonical names of aliases first */
    entry all[] = {
    T(MPI_CHAR),
    T(MPI_SIGNED_CHAR),
    T(MPI_UNSIGNED_CHAR),
    T(MPI_BYTE),
    T(MPI_WCHAR),
    T(MPI_SHORT),
    T(MPI_UNSIGNED_SHORT),
    T(MPI_INT),
    T(MPI_UNSIGNED),
    T(MPI_LONG),
    T(MPI_UNSIGNED_LONG),
    T(MPI_FLOAT),
    T(MPI_DOUBLE),
    T(MPI_LONG_DOUBLE),
    T(MPI_LONG_LONG_INT),
    T(MPI_LONG_LONG),
    T(MPI_UNSIGNED_LONG_LONG),
    T(MPI_PACKED),
    T(MPI_FLOAT_INT),
    T(MPI_DOUBLE_INT),
    T(MPI_LONG_INT),
    T(MPI_SHORT_INT),
    T(MPI_2INT),
    T(MPI_LONG_DOUBLE_INT),
    T(MPI_COMPLEX),
    T(MPI_DOUBLE_COMPLEX),
    T(MPI_LOGICAL),
    T(MPI_REAL),
    T(MPI_DOUBLE_PRECISION),
    T(MPI_INTEGER),
    T(MPI_2INTEGER),
    T(MPI_2REAL),
    T(MPI_2DOUBLE_PRECISION),
    T(MPI_CHARACTER),
    T(MPI_REAL4),
    T(MPI_REAL8),
    T(MPI_REAL16),
    T(MPI_COMPLEX8),
    T(MPI_COMPLEX16),
    T(MPI_COMPLEX32),
    T(MPI_INTEGER1),
    T(MPI_INTEGER2),
    T(MPI_INTEGER4),
    T(MPI_INTEGER8),
    T(MPI_INT8_T),
    T(MPI_INT16_T),
    T(MPI_INT32_T),
    T(MPI_INT64_T),
    T(MPI_UINT8_T),
    T(MPI_UINT16_T),
    T(MPI_UINT32_T),
    T(MPI_UINT64_T),
    T(MPI_C_BOOL),
    T(MPI_C_COMPLEX),
    T(MPI_C_FLOAT_COMPLEX),
    T(MPI_C_DOUBLE_COMPLEX),
    T(MPI_C_LONG_DOUBLE_COMPLEX),
    T(MPI_AINT),
    T(MPI_OFFSET),
    T(MPI_COUNT),
    T(MPI_CXX_BOOL),
    T(MPI_CXX_FLOAT_COMPLEX),
    T(MPI_CXX_DOUBLE_COMPLEX),
    T(MPI_CXX_LONG_DOUBLE_COMPLEX),
    };
    int n = (int)(sizeof all / sizeof all[0]), i, j, len;
    char got[MPI_MAX_OBJECT_NAME];
    MPI_Datatype d;

    MPI_Init(&argc, &argv);
    test_begin("type_names");
    for (i = 0; i < n; i++) {
        const char *want = all[i].name;
        if (all[i].t == MPI_DATATYPE_NULL)
            continue; /* optional types this library lacks */
        for (j = 0; j < i; j++)
            if (all[j].t == all[i].t) {
                want = all[j].name; /* one handle, the first name */
                break;
            }
        got[0] = 0;
        CHECK_MPI(MPI_Type_get_name(all[i].t, got, &len));
        CHECK(strcmp(got, want) == 0 && len == (int)strlen(want),
              "MPI_Type_get_name(%s) = \"%s\" (length %d), expected \"%s\"", all[i].name, got,
              len, want);
    }
    CHECK_MPI(MPI_Type_dup(MPI_C_COMPLEX, &d));
    CHECK_MPI(MPI_Type_set_name(d, "mine"));
    CHECK_MPI(MPI_Type_get_name(MPI_C_COMPLEX, got, &len));
    CHECK(strcmp(got, "MPI_C_COMPLEX") == 0, "after naming a duplicate: \"%s\"", got);
    CHECK_MPI(MPI_Type_free(&d));
    return test_end();
}
