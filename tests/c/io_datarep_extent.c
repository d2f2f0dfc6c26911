/* A user data representation whose file extents differ from the native sizes: "be64int"
 * stores MPI_INT as 8-byte big-endian integers. Every rank writes its ints through a vector
 * filetype interleaving the ranks' blocks of 2 (the vector's stride counts elements, so it is
 * scaled by the 8-byte file extent; the displacement is in file bytes): the first half
 * collectively, the second half independently. The raw file is checked byte by byte through
 * a native view (8 bytes per int, sign-extended, big-endian, blocks where the scaled vector
 * puts them); MPI_File_get_type_extent, positions and byte offsets count file bytes; the
 * status counts ints. The neighbour's ints read back through the representation,
 * collectively and independently (individual pointer), and a read past the end returns the
 * whole ints there are. */
#include <mpi.h>
#include "stormtest.h"
#include <stdint.h>
#include <string.h>
#include "io_common.h"

#define N 24 /* ints per rank, in blocks of 2 */

static int calls; /* conversion calls, counted through extra_state */

static int val(int rank, int i) { return (i % 3 ? -1 : 1) * (rank * 1000 + i * 7 + 3); }

/* Converts `count` ints from item `position` of a contiguous MPI_INT buffer to or from
 * 8-byte big-endian items in filebuf; `dir` 1 converts user -> file. */
static int conv(void *userbuf, MPI_Datatype dt, int count, void *filebuf, MPI_Offset position,
                void *extra, int dir)
{
    if (dt != MPI_INT)
        return MPI_ERR_TYPE;
    int *u = (int *)userbuf + position;
    unsigned char *f = filebuf;
    for (int i = 0; i < count; i++, f += 8) {
        if (dir) {
            uint64_t v = (uint64_t)(int64_t)u[i];
            for (int b = 0; b < 8; b++)
                f[b] = (unsigned char)(v >> (56 - 8 * b));
        } else {
            uint64_t v = 0;
            for (int b = 0; b < 8; b++)
                v = v << 8 | f[b];
            if ((int64_t)v < INT32_MIN || (int64_t)v > INT32_MAX)
                return MPI_ERR_CONVERSION;
            u[i] = (int)(int64_t)v;
        }
    }
    ++*(int *)extra;
    return MPI_SUCCESS;
}

static int rd(void *u, MPI_Datatype dt, int n, void *f, MPI_Offset p, void *x) { return conv(u, dt, n, f, p, x, 0); }
static int wr(void *u, MPI_Datatype dt, int n, void *f, MPI_Offset p, void *x) { return conv(u, dt, n, f, p, x, 1); }

static int extent(MPI_Datatype dt, MPI_Aint *ext, void *x)
{
    (void)x;
    if (dt == MPI_INT) {
        *ext = 8;
        return MPI_SUCCESS;
    }
    int sz;
    int rc = MPI_Type_size(dt, &sz);
    *ext = sz;
    return rc;
}

/* Where int i of rank r lies in the file. */
static MPI_Offset where(int r, int i, int size) { return (MPI_Offset)r * 16 + (MPI_Offset)(i / 2) * 16 * size + (i % 2) * 8; }

static void expect_count(MPI_Status *st, int want, const char *what)
{
    int got;
    MPI_Get_count(st, MPI_INT, &got);
    CHECK(got == want, "%s: count %d, expected %d", what, got, want);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("io_datarep_extent");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int other = (rank + 1) % size;
    CHECK_MPI(MPI_Register_datarep("be64int", rd, wr, extent, &calls));

    char path[256];
    io_path(path, sizeof path, "io_datarep_extent");
    MPI_File fh;
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
    MPI_Datatype vec;
    MPI_Type_vector(N / 2, 2, 2 * size, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    int v[N], back[N + 8];
    for (int i = 0; i < N; i++)
        v[i] = val(rank, i);
    MPI_Status st;

    CHECK_MPI(MPI_File_set_view(fh, (MPI_Offset)rank * 16, MPI_INT, vec, "be64int", MPI_INFO_NULL));
    MPI_Aint fext;
    CHECK_MPI(MPI_File_get_type_extent(fh, MPI_INT, &fext));
    CHECK(fext == 8, "file extent of MPI_INT: %ld", (long)fext);
    CHECK_MPI(MPI_File_get_type_extent(fh, vec, &fext));
    CHECK(fext == ((N / 2 - 1) * 2 * size + 2) * 8, "file extent of the vector: %ld", (long)fext);
    calls = 0;
    CHECK_MPI(MPI_File_write_at_all(fh, 0, v, N / 2, MPI_INT, &st));
    expect_count(&st, N / 2, "write_at_all");
    CHECK_MPI(MPI_File_seek(fh, N / 2, MPI_SEEK_SET));
    CHECK_MPI(MPI_File_write(fh, v + N / 2, N / 2, MPI_INT, &st));
    expect_count(&st, N / 2, "write");
    CHECK(calls >= 2, "the write conversion ran %d times", calls);
    MPI_Offset pos, byte;
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK(pos == N, "position after the writes: %lld", (long long)pos);
    CHECK_MPI(MPI_File_get_byte_offset(fh, 3, &byte));
    CHECK(byte == where(rank, 3, size), "byte offset of int 3: %lld, expected %lld", (long long)byte, (long long)where(rank, 3, size));
    CHECK_MPI(MPI_File_sync(fh));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_File_sync(fh));

    /* The raw bytes of every rank's ints. */
    CHECK_MPI(MPI_File_get_size(fh, &byte));
    CHECK(byte == (MPI_Offset)size * N * 8, "file size %lld, expected %lld", (long long)byte, (long long)size * N * 8);
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    unsigned char raw[8];
    for (int r = 0; r < size; r++)
        for (int i = 0; i < N; i++) {
            CHECK_MPI(MPI_File_read_at(fh, where(r, i, size), raw, 8, MPI_BYTE, &st));
            int64_t want = val(r, i);
            for (int b = 0; b < 8; b++)
                CHECK(raw[b] == (unsigned char)((uint64_t)want >> (56 - 8 * b)),
                      "file byte %d of int %d of rank %d: %02x", b, i, r, raw[b]);
        }

    /* Back through the representation: the neighbour's ints, collectively, then by pointer. */
    CHECK_MPI(MPI_File_set_view(fh, (MPI_Offset)other * 16, MPI_INT, vec, "be64int", MPI_INFO_NULL));
    memset(back, 0, sizeof back);
    calls = 0;
    CHECK_MPI(MPI_File_read_at_all(fh, 0, back, N, MPI_INT, &st));
    expect_count(&st, N, "read_at_all");
    CHECK(calls >= 1, "the read conversion ran %d times", calls);
    for (int i = 0; i < N; i++)
        CHECK(back[i] == val(other, i), "int %d of rank %d read back as %d", i, other, back[i]);
    memset(back, 0, sizeof back);
    CHECK_MPI(MPI_File_seek(fh, 5, MPI_SEEK_SET));
    CHECK_MPI(MPI_File_read(fh, back, 7, MPI_INT, &st));
    expect_count(&st, 7, "read");
    for (int i = 0; i < 7; i++)
        CHECK(back[i] == val(other, 5 + i), "int %d of rank %d read by pointer as %d", 5 + i, other, back[i]);
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK(pos == 12, "position after the read: %lld", (long long)pos);
    /* Past the end of the file (the last rank's view ends at its last block): whole ints. */
    CHECK_MPI(MPI_File_set_view(fh, (MPI_Offset)(size - 1) * 16, MPI_INT, vec, "be64int", MPI_INFO_NULL));
    CHECK_MPI(MPI_File_read_at(fh, N - 2, back, 8, MPI_INT, &st));
    expect_count(&st, 2, "read at the end");
    CHECK(back[0] == val(size - 1, N - 2) && back[1] == val(size - 1, N - 1), "the last ints read as %d %d", back[0], back[1]);

    CHECK_MPI(MPI_File_close(&fh));
    MPI_Type_free(&vec);
    return test_end();
}
