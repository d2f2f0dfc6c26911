/* The external32 data representation: ints and doubles written through an external32 view
 * are big-endian in the file (checked through a native byte view), read back right through an
 * external32 view with a strided memory type (io_external32_long, io_external32_holes and
 * io_external32_darray test types whose external32 size differs). */
#include <mpi.h>
#include "stormtest.h"
#include "io_common.h"

#define N 64

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("io_external32");
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char path[256];
    io_path(path, sizeof path, "io_external32");
    MPI_File fh;
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
    MPI_Offset base = (MPI_Offset)rank * N * 12;
    CHECK_MPI(MPI_File_set_view(fh, base, MPI_BYTE, MPI_BYTE, "external32", MPI_INFO_NULL));
    char rep[MPI_MAX_DATAREP_STRING];
    MPI_Offset d;
    MPI_Datatype et, ft;
    CHECK_MPI(MPI_File_get_view(fh, &d, &et, &ft, rep));
    CHECK(strcmp(rep, "external32") == 0, "datarep %s", rep);
    int iv[N];
    double dv[N];
    for (int i = 0; i < N; i++) {
        iv[i] = 0x01020304 + rank * 256 + i;
        dv[i] = rank + i / 8.0;
    }
    MPI_Status st;
    CHECK_MPI(MPI_File_write_at(fh, 0, iv, N, MPI_INT, &st));
    CHECK_MPI(MPI_File_write_at(fh, N * 4, dv, N, MPI_DOUBLE, &st));

    /* Native bytes: big-endian. */
    CHECK_MPI(MPI_File_set_view(fh, base, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    unsigned char raw[N * 12];
    CHECK_MPI(MPI_File_read_at(fh, 0, raw, N * 12, MPI_BYTE, &st));
    for (int i = 0; i < N; i++) {
        unsigned v = (unsigned)iv[i];
        CHECK(raw[4 * i] == (v >> 24) && raw[4 * i + 1] == ((v >> 16) & 0xff) && raw[4 * i + 2] == ((v >> 8) & 0xff) && raw[4 * i + 3] == (v & 0xff),
              "int %d is not big-endian in the file", i);
    }
    unsigned char dbytes[8];
    memcpy(dbytes, &dv[1], 8);
    int little = 1;
    little = *(unsigned char *)&little;
    for (int b = 0; b < 8; b++)
        CHECK(raw[N * 4 + 8 + b] == dbytes[little ? 7 - b : b], "double 1 byte %d is %02x", b, raw[N * 4 + 8 + b]);

    /* Back through external32, into every other element of a strided memory type. */
    CHECK_MPI(MPI_File_set_view(fh, base, MPI_INT, MPI_INT, "external32", MPI_INFO_NULL));
    int back[2 * N];
    memset(back, 0, sizeof back);
    MPI_Datatype every2;
    MPI_Type_vector(N, 1, 2, MPI_INT, &every2);
    MPI_Type_commit(&every2);
    CHECK_MPI(MPI_File_read_at(fh, 0, back, 1, every2, &st));
    for (int i = 0; i < N; i++)
        CHECK(back[2 * i] == iv[i] && back[2 * i + 1] == 0, "external32 int %d read back as %d", i, back[2 * i]);
    CHECK_MPI(MPI_File_set_view(fh, base + N * 4, MPI_DOUBLE, MPI_DOUBLE, "external32", MPI_INFO_NULL));
    double dback[N];
    CHECK_MPI(MPI_File_read(fh, dback, N, MPI_DOUBLE, &st));
    for (int i = 0; i < N; i++)
        CHECK(dback[i] == dv[i], "external32 double %d read back as %g", i, dback[i]);

    CHECK_MPI(MPI_File_close(&fh));
    MPI_Type_free(&every2);
    return test_end();
}
