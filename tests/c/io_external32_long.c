/* external32 of types whose size changes (MPI_LONG, MPI_UNSIGNED_LONG: 8 bytes natively on
 * LP64, 4 in external32): longs written through an external32 view (collectively, at explicit
 * offsets, through a contiguous filetype) are 4-byte big-endian in the file, checked byte by
 * byte through a native view; file pointers and byte offsets count external32 bytes; the
 * status counts longs; they read back right, into a strided memory type too; a long that
 * does not fit 4 bytes is MPI_ERR_CONVERSION. */
#include <mpi.h>
#include "stormtest.h"
#include "io_common.h"

#define N 50

static long val(int rank, int i) { return (i % 2 ? -1L : 1L) * (rank * 100000L + i * 13 + 5); }

/* The 4-byte big-endian integer at p. */
static int be32(const unsigned char *p)
{
    return (int)((unsigned)p[0] << 24 | (unsigned)p[1] << 16 | (unsigned)p[2] << 8 | p[3]);
}

static void expect_count(MPI_Status *st, MPI_Datatype dt, int want, const char *what)
{
    int got;
    MPI_Get_count(st, dt, &got);
    CHECK(got == want, "%s: count %d, expected %d", what, got, want);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("io_external32_long");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int other = (rank + 1) % size;
    char path[256];
    io_path(path, sizeof path, "io_external32_long");
    MPI_File fh;
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
    const MPI_Offset region = (MPI_Offset)size * N * 4;
    long lv[N], back[2 * N];
    for (int i = 0; i < N; i++)
        lv[i] = val(rank, i);
    MPI_Status st;

    /* Region 0: each rank's N longs through its own view, collectively. */
    CHECK_MPI(MPI_File_set_view(fh, (MPI_Offset)rank * N * 4, MPI_LONG, MPI_LONG, "external32", MPI_INFO_NULL));
    MPI_Aint fext;
    CHECK_MPI(MPI_File_get_type_extent(fh, MPI_LONG, &fext));
    CHECK(fext == 4, "external32 file extent of MPI_LONG is %ld", (long)fext);
    CHECK_MPI(MPI_File_write_all(fh, lv, N, MPI_LONG, &st));
    expect_count(&st, MPI_LONG, N, "write_all");
    MPI_Offset pos, byte;
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK(pos == N, "position after the write: %lld", (long long)pos);
    CHECK_MPI(MPI_File_get_byte_offset(fh, pos, &byte));
    CHECK(byte == (MPI_Offset)rank * N * 4 + N * 4, "byte offset %lld", (long long)byte);

    /* Region 1: unsigned longs at explicit offsets, through a contiguous filetype of 2. */
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_UNSIGNED_LONG, &pair);
    MPI_Type_commit(&pair);
    unsigned long uv[N];
    for (int i = 0; i < N; i++)
        uv[i] = 0xdeadbe00UL + (unsigned long)rank * 64 + (unsigned long)i;
    CHECK_MPI(MPI_File_set_view(fh, region, MPI_UNSIGNED_LONG, pair, "external32", MPI_INFO_NULL));
    CHECK_MPI(MPI_File_write_at(fh, (MPI_Offset)rank * N, uv, N, MPI_UNSIGNED_LONG, &st));
    expect_count(&st, MPI_UNSIGNED_LONG, N, "write_at");
    CHECK_MPI(MPI_File_sync(fh));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_File_sync(fh));

    /* The bytes: 4 per value, big-endian. */
    unsigned char raw[N * 4];
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    CHECK_MPI(MPI_File_read_at(fh, (MPI_Offset)other * N * 4, raw, N * 4, MPI_BYTE, &st));
    for (int i = 0; i < N; i++)
        CHECK(be32(raw + 4 * i) == (int)val(other, i), "file long %d of rank %d: %d, expected %ld", i, other, be32(raw + 4 * i), val(other, i));
    CHECK_MPI(MPI_File_read_at(fh, region + (MPI_Offset)other * N * 4, raw, N * 4, MPI_BYTE, &st));
    for (int i = 0; i < N; i++) {
        unsigned want = 0xdeadbe00u + (unsigned)other * 64 + (unsigned)i;
        CHECK((unsigned)be32(raw + 4 * i) == want, "file unsigned long %d of rank %d: %x, expected %x", i, other, (unsigned)be32(raw + 4 * i), want);
    }
    CHECK_MPI(MPI_File_get_size(fh, &byte));
    CHECK(byte == 2 * region, "file size %lld, expected %lld", (long long)byte, (long long)(2 * region));

    /* Back through external32: the neighbour's longs, collectively, into every other long. */
    MPI_Datatype every2;
    MPI_Type_vector(N, 1, 2, MPI_LONG, &every2);
    MPI_Type_commit(&every2);
    for (int i = 0; i < 2 * N; i++)
        back[i] = 77;
    CHECK_MPI(MPI_File_set_view(fh, (MPI_Offset)other * N * 4, MPI_LONG, MPI_LONG, "external32", MPI_INFO_NULL));
    CHECK_MPI(MPI_File_read_at_all(fh, 0, back, 1, every2, &st));
    expect_count(&st, every2, 1, "read_at_all");
    for (int i = 0; i < N; i++)
        CHECK(back[2 * i] == val(other, i) && back[2 * i + 1] == 77, "long %d read back as %ld", i, back[2 * i]);
    unsigned long ub[N];
    CHECK_MPI(MPI_File_set_view(fh, region, MPI_UNSIGNED_LONG, pair, "external32", MPI_INFO_NULL));
    CHECK_MPI(MPI_File_read_at(fh, (MPI_Offset)other * N, ub, N, MPI_UNSIGNED_LONG, &st));
    expect_count(&st, MPI_UNSIGNED_LONG, N, "read_at");
    for (int i = 0; i < N; i++)
        CHECK(ub[i] == 0xdeadbe00UL + (unsigned long)other * 64 + (unsigned long)i, "unsigned long %d read back as %lx", i, ub[i]);
    /* Past the end: the last rank's last 2 values and nothing more, counted in longs. */
    CHECK_MPI(MPI_File_read_at(fh, (MPI_Offset)size * N - 2, ub, 10, MPI_UNSIGNED_LONG, &st));
    expect_count(&st, MPI_UNSIGNED_LONG, 2, "read at the end");

    if (sizeof(long) > 4) { /* a long external32 cannot hold */
        long big = 1L << 40;
        CHECK_MPI(MPI_File_set_view(fh, (MPI_Offset)rank * N * 4, MPI_LONG, MPI_LONG, "external32", MPI_INFO_NULL));
        int rc = MPI_File_write_at(fh, 0, &big, 1, MPI_LONG, &st);
        int cls = MPI_SUCCESS;
        if (rc != MPI_SUCCESS)
            MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_CONVERSION, "a long too large for external32: class %d", cls);
    }

    CHECK_MPI(MPI_File_close(&fh));
    MPI_Type_free(&pair);
    MPI_Type_free(&every2);
    return test_end();
}
