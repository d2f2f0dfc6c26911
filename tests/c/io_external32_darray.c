/* A darray filetype of MPI_LONG in external32 (8 bytes natively on LP64, 4 in the file): a
 * 2-D array of longs written collectively through a block x cyclic(2) distribution over a
 * process grid of MPI_Dims_create; the file holds the whole array in row-major order as 4-byte
 * big-endian integers after a 16-byte header (checked byte by byte through a native view); the
 * view's type extent counts external32 bytes; it reads back right, collectively and at
 * explicit offsets, through a different decomposition (Fortran order, the grid transposed,
 * block x cyclic(3)). */
#include <mpi.h>
#include "stormtest.h"
#include "io_common.h"

#define GR 12 /* rows */
#define GC 10 /* columns */
#define HEADER 16

static long val(int i, int j) { return ((i + j) % 2 ? -1L : 1L) * (i * 1000L + j * 7 + 3); }

static int be32(const unsigned char *p)
{
    return (int)((unsigned)p[0] << 24 | (unsigned)p[1] << 16 | (unsigned)p[2] << 8 | p[3]);
}

/* Whether index x of a dimension of g elements is owned by grid coordinate c of p. */
static int owns(int distrib, int darg, int g, int p, int c, int x)
{
    if (distrib == MPI_DISTRIBUTE_NONE)
        return 1;
    if (distrib == MPI_DISTRIBUTE_BLOCK) {
        int b = darg == MPI_DISTRIBUTE_DFLT_DARG ? (g + p - 1) / p : darg;
        return x / b == c;
    }
    int k = darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg;
    return (x / k) % p == c;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("io_external32_darray");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char path[256];
    io_path(path, sizeof path, "io_external32_darray");
    MPI_File fh;
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
    int dims[2] = {0, 0};
    MPI_Dims_create(size, 2, dims);
    /* The grid is row-major whatever the array's order. */
    int c0 = rank / dims[1], c1 = rank % dims[1];

    /* Writing: rows in blocks, columns cyclic by 2, C order. */
    int gs[2] = {GR, GC}, ds[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC};
    int da[2] = {MPI_DISTRIBUTE_DFLT_DARG, 2};
    MPI_Datatype wtype;
    CHECK_MPI(MPI_Type_create_darray(size, rank, 2, gs, ds, da, dims, MPI_ORDER_C, MPI_LONG, &wtype));
    MPI_Type_commit(&wtype);
    long mine[GR * GC];
    int n = 0, first = -1; /* first: the file element of local element 0 */
    for (int i = 0; i < GR; i++)
        for (int j = 0; j < GC; j++)
            if (owns(ds[0], da[0], GR, dims[0], c0, i) && owns(ds[1], da[1], GC, dims[1], c1, j)) {
                if (first < 0)
                    first = i * GC + j;
                mine[n++] = val(i, j);
            }
    int tsize;
    MPI_Type_size(wtype, &tsize);
    CHECK(tsize == n * (int)sizeof(long), "darray size %d, expected %d longs", tsize, n);
    CHECK_MPI(MPI_File_set_view(fh, HEADER, MPI_LONG, wtype, "external32", MPI_INFO_NULL));
    MPI_Aint fext;
    CHECK_MPI(MPI_File_get_type_extent(fh, wtype, &fext));
    CHECK(fext == GR * GC * 4, "external32 file extent of the darray: %ld, expected %d", (long)fext, GR * GC * 4);
    MPI_Status st;
    CHECK_MPI(MPI_File_write_all(fh, mine, n, MPI_LONG, &st));
    int got;
    MPI_Get_count(&st, MPI_LONG, &got);
    CHECK(got == n, "write_all count %d, expected %d", got, n);
    MPI_Offset pos, byte;
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK(pos == n, "position after the write: %lld, expected %d", (long long)pos, n);
    if (n > 0) {
        CHECK_MPI(MPI_File_get_byte_offset(fh, 0, &byte));
        CHECK(byte == HEADER + 4 * first, "byte offset of local element 0: %lld, expected %d", (long long)byte, HEADER + 4 * first);
    }
    CHECK_MPI(MPI_File_sync(fh));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_File_sync(fh));

    /* The bytes: the whole array row-major, 4 bytes big-endian each. */
    CHECK_MPI(MPI_File_get_size(fh, &byte));
    CHECK(byte == HEADER + GR * GC * 4, "file size %lld, expected %d", (long long)byte, HEADER + GR * GC * 4);
    static unsigned char raw[GR * GC * 4];
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    CHECK_MPI(MPI_File_read_at(fh, HEADER, raw, GR * GC * 4, MPI_BYTE, &st));
    for (int i = 0; i < GR; i++)
        for (int j = 0; j < GC; j++)
            CHECK(be32(raw + 4 * (i * GC + j)) == (int)val(i, j), "file element (%d,%d): %d, expected %ld", i, j, be32(raw + 4 * (i * GC + j)), val(i, j));

    /* Reading by another decomposition: Fortran order (columns fastest is dimension 0), the
     * grid transposed, columns in blocks and rows cyclic by 3. */
    int rgs[2] = {GC, GR}, rds[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC};
    int rda[2] = {MPI_DISTRIBUTE_DFLT_DARG, 3}, rdims[2] = {dims[1], dims[0]};
    int r0 = rank / rdims[1], r1 = rank % rdims[1];
    MPI_Datatype rtype;
    CHECK_MPI(MPI_Type_create_darray(size, rank, 2, rgs, rds, rda, rdims, MPI_ORDER_FORTRAN, MPI_LONG, &rtype));
    MPI_Type_commit(&rtype);
    long want[GR * GC], back[GR * GC];
    int m = 0;
    /* Type-map order: dimension 0 (a column) fastest, so row-major over (row, column). */
    for (int i = 0; i < GR; i++)
        for (int j = 0; j < GC; j++)
            if (owns(rds[0], rda[0], GC, rdims[0], r0, j) && owns(rds[1], rda[1], GR, rdims[1], r1, i))
                want[m++] = val(i, j);
    CHECK_MPI(MPI_File_set_view(fh, HEADER, MPI_LONG, rtype, "external32", MPI_INFO_NULL));
    for (int k = 0; k < GR * GC; k++)
        back[k] = 77;
    CHECK_MPI(MPI_File_read_all(fh, back, m, MPI_LONG, &st));
    MPI_Get_count(&st, MPI_LONG, &got);
    CHECK(got == m, "read_all count %d, expected %d", got, m);
    for (int k = 0; k < m; k++)
        CHECK(back[k] == want[k], "read_all: local element %d is %ld, expected %ld", k, back[k], want[k]);
    CHECK(m == GR * GC || back[m] == 77, "read_all wrote past its %d longs", m);
    /* The second half again, independently at an explicit offset in etypes. */
    int half = m / 2;
    for (int k = 0; k < GR * GC; k++)
        back[k] = 77;
    CHECK_MPI(MPI_File_read_at(fh, half, back, m - half, MPI_LONG, &st));
    MPI_Get_count(&st, MPI_LONG, &got);
    CHECK(got == m - half, "read_at count %d, expected %d", got, m - half);
    for (int k = half; k < m; k++)
        CHECK(back[k - half] == want[k], "read_at: local element %d is %ld, expected %ld", k, back[k - half], want[k]);

    CHECK_MPI(MPI_File_close(&fh));
    MPI_Type_free(&wtype);
    MPI_Type_free(&rtype);
    return test_end();
}
