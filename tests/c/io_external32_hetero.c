/* external32 across architectures (tests/tests/hetero.rs runs it with x86_64 and s390x ranks in
 * one job): every rank writes its block of ints, doubles, shorts and a long long through an
 * external32 view, independently and then collectively; every rank reads every other rank's
 * blocks back through external32 and checks the values, which depend only on the writer's rank,
 * so a rank of the other byte order proves the file holds one representation. The ints are also
 * checked big-endian byte by byte through a native byte view. */
#include <mpi.h>
#include "stormtest.h"
#include "io_common.h"
#include <string.h>

#define N 32
/* Bytes of one rank's block in external32: N ints, N doubles, N shorts, one long long. */
#define BLOCK (N * 4 + N * 8 + N * 2 + 8)

struct vals {
    int i[N];
    double d[N];
    short s[N];
    long long ll;
};

static void fill(struct vals *v, int rank, int pass)
{
    for (int k = 0; k < N; k++) {
        v->i[k] = 0x01020304 + rank * 4096 + k + pass;
        v->d[k] = rank * 1000.0 + k / 4.0 + pass;
        v->s[k] = (short)(-300 * rank - k - pass);
    }
    v->ll = -(0x0102030405060708LL + rank + pass);
}

static MPI_Offset block_at(int rank, int pass, int size) { return ((MPI_Offset)pass * size + rank) * BLOCK; }

static void put(MPI_File fh, int rank, int size, int pass, int all)
{
    struct vals v;
    fill(&v, rank, pass);
    MPI_Offset at = block_at(rank, pass, size);
    MPI_Status st;
    if (all) {
        CHECK_MPI(MPI_File_write_at_all(fh, at, v.i, N, MPI_INT, &st));
        CHECK_MPI(MPI_File_write_at_all(fh, at + N * 4, v.d, N, MPI_DOUBLE, &st));
        CHECK_MPI(MPI_File_write_at_all(fh, at + N * 12, v.s, N, MPI_SHORT, &st));
        CHECK_MPI(MPI_File_write_at_all(fh, at + N * 14, &v.ll, 1, MPI_LONG_LONG, &st));
    } else {
        CHECK_MPI(MPI_File_write_at(fh, at, v.i, N, MPI_INT, &st));
        CHECK_MPI(MPI_File_write_at(fh, at + N * 4, v.d, N, MPI_DOUBLE, &st));
        CHECK_MPI(MPI_File_write_at(fh, at + N * 12, v.s, N, MPI_SHORT, &st));
        CHECK_MPI(MPI_File_write_at(fh, at + N * 14, &v.ll, 1, MPI_LONG_LONG, &st));
    }
}

static void check(MPI_File fh, int writer, int size, int pass)
{
    struct vals want, got;
    fill(&want, writer, pass);
    memset(&got, 0, sizeof got);
    MPI_Offset at = block_at(writer, pass, size);
    MPI_Status st;
    CHECK_MPI(MPI_File_read_at(fh, at, got.i, N, MPI_INT, &st));
    CHECK_MPI(MPI_File_read_at(fh, at + N * 4, got.d, N, MPI_DOUBLE, &st));
    CHECK_MPI(MPI_File_read_at(fh, at + N * 12, got.s, N, MPI_SHORT, &st));
    CHECK_MPI(MPI_File_read_at(fh, at + N * 14, &got.ll, 1, MPI_LONG_LONG, &st));
    for (int k = 0; k < N; k++) {
        CHECK(got.i[k] == want.i[k], "rank %d pass %d int %d: %d, not %d", writer, pass, k, got.i[k], want.i[k]);
        CHECK(got.d[k] == want.d[k], "rank %d pass %d double %d: %g, not %g", writer, pass, k, got.d[k], want.d[k]);
        CHECK(got.s[k] == want.s[k], "rank %d pass %d short %d: %d, not %d", writer, pass, k, got.s[k], want.s[k]);
    }
    CHECK(got.ll == want.ll, "rank %d pass %d long long: %lld", writer, pass, got.ll);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("io_external32_hetero");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char path[256];
    io_path(path, sizeof path, "io_external32_hetero");
    MPI_File fh;
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                            MPI_INFO_NULL, &fh));
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "external32", MPI_INFO_NULL));
    put(fh, rank, size, 0, 0);
    put(fh, rank, size, 1, 1);
    CHECK_MPI(MPI_File_sync(fh));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_MPI(MPI_File_sync(fh));
    for (int w = 0; w < size; w++)
        for (int pass = 0; pass < 2; pass++)
            check(fh, w, size, pass);

    /* The ints of the last rank's first block are big-endian in the file. */
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    unsigned char raw[N * 4];
    MPI_Status st;
    CHECK_MPI(MPI_File_read_at(fh, block_at(size - 1, 0, size), raw, N * 4, MPI_BYTE, &st));
    struct vals want;
    fill(&want, size - 1, 0);
    for (int k = 0; k < N; k++) {
        unsigned v = (unsigned)want.i[k];
        CHECK(raw[4 * k] == (v >> 24) && raw[4 * k + 1] == ((v >> 16) & 0xff) &&
                  raw[4 * k + 2] == ((v >> 8) & 0xff) && raw[4 * k + 3] == (v & 0xff),
              "int %d of rank %d is not big-endian in the file", k, size - 1);
    }
    CHECK_MPI(MPI_File_close(&fh));
    return test_end();
}
