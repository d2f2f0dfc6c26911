/*
 * status_conv.c - MPI_Status_c2f, f2c, c2f08, f082c, f2f08, f082f.
 *
 * Checked: a status filled by a real receive (source, tag, count, cancelled flag) survives
 * C -> Fortran -> C and C -> F08 -> Fortran -> F08 -> C unchanged, field by field and by
 * MPI_Get_count; MPI_F_STATUS_IGNORE, MPI_F08_STATUS_IGNORE and MPI_STATUS_IGNORE are refused
 * with MPI_ERR_ARG (under MPI_ERRORS_RETURN) and nothing is written.
 *
 * usage: status_conv
 */
#include "stormtest.h"

int main(int argc, char **argv)
{
    int rank, size, count, back_count, rc, cls;
    int data[7] = {0};
    MPI_Status st, back;
    MPI_Fint f[MPI_F_STATUS_SIZE], f2[MPI_F_STATUS_SIZE];
    MPI_F08_status f08;

    MPI_Init(&argc, &argv);
    test_begin("status_conv");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    CHECK_MPI(MPI_Sendrecv(data, 7, MPI_INT, (rank + 1) % size, 40 + rank, data, 7, MPI_INT,
                           (rank + size - 1) % size, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(count == 7, "count %d", count);

    CHECK_MPI(MPI_Status_c2f(&st, f));
    CHECK(f[MPI_F_SOURCE] == st.MPI_SOURCE && f[MPI_F_TAG] == st.MPI_TAG &&
              f[MPI_F_ERROR] == st.MPI_ERROR,
          "c2f fields: source %d tag %d", (int)f[MPI_F_SOURCE], (int)f[MPI_F_TAG]);
    memset(&back, 0xff, sizeof back);
    CHECK_MPI(MPI_Status_f2c(f, &back));
    CHECK_MPI(MPI_Get_count(&back, MPI_INT, &back_count));
    CHECK(back.MPI_SOURCE == st.MPI_SOURCE && back.MPI_TAG == st.MPI_TAG && back_count == 7,
          "f2c: source %d tag %d count %d", back.MPI_SOURCE, back.MPI_TAG, back_count);

    CHECK_MPI(MPI_Status_c2f08(&st, &f08));
    CHECK(f08.MPI_SOURCE == st.MPI_SOURCE && f08.MPI_TAG == st.MPI_TAG, "c2f08 fields");
    CHECK_MPI(MPI_Status_f082f(&f08, f2));
    CHECK(memcmp(f, f2, sizeof f) == 0, "f082f differs from c2f");
    memset(&f08, 0, sizeof f08);
    CHECK_MPI(MPI_Status_f2f08(f2, &f08));
    memset(&back, 0, sizeof back);
    CHECK_MPI(MPI_Status_f082c(&f08, &back));
    CHECK_MPI(MPI_Get_count(&back, MPI_INT, &back_count));
    CHECK(back.MPI_SOURCE == st.MPI_SOURCE && back.MPI_TAG == st.MPI_TAG && back_count == 7,
          "the f08 round trip lost fields");

    memset(&back, 0x5a, sizeof back);
    rc = MPI_Status_f2c(MPI_F_STATUS_IGNORE, &back);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_ARG, "f2c of MPI_F_STATUS_IGNORE: class %d", cls);
    CHECK(back.MPI_SOURCE == 0x5a5a5a5a, "f2c of MPI_F_STATUS_IGNORE wrote the status");
    rc = MPI_Status_c2f(MPI_STATUS_IGNORE, f);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_ARG, "c2f of MPI_STATUS_IGNORE: class %d", cls);
    rc = MPI_Status_f082c(MPI_F08_STATUS_IGNORE, &back);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_ARG, "f082c of MPI_F08_STATUS_IGNORE: class %d", cls);

    return test_end();
}
