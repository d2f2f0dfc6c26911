/* darray filetypes in data representations that change a type's size: MPI_LONG in external32
 * (8 bytes natively on LP64, 4 in the file), then MPI_INT in a user representation "be64int"
 * (8-byte big-endian in the file). A 2-D array written collectively through a block x cyclic(2)
 * distribution over a process grid of MPI_Dims_create; the file holds the whole array in
 * row-major order as big-endian integers of the file size after a 16-byte header (checked byte
 * by byte through a native view); the view's type extent and byte offsets count file bytes; it
 * reads back right, collectively and at an explicit offset, through a different decomposition
 * (Fortran order, the grid transposed, block x cyclic(3)). */
#include <mpi.h>
#include "stormtest.h"
#include <stdint.h>
#include "io_common.h"

#define GR 12 /* rows */
#define GC 10 /* columns */
#define HEADER 16

static int calls; /* be64int conversion calls */

static long val(int i, int j) { return ((i + j) % 2 ? -1L : 1L) * (i * 1000L + j * 7 + 3); }

/* The w-byte big-endian signed integer at p. */
static long be(const unsigned char *p, int w)
{
    uint64_t v = 0;
    for (int b = 0; b < w; b++)
        v = v << 8 | p[b];
    if (w < 8 && (v >> (8 * w - 1)) & 1)
        v |= ~(uint64_t)0 << (8 * w);
    return (long)(int64_t)v;
}

/* "be64int": MPI_INT as 8-byte big-endian integers; `dir` 1 converts user -> file. */
static int conv(void *userbuf, MPI_Datatype dt, int count, void *filebuf, MPI_Offset position, int dir)
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
            long v = be(f, 8);
            if (v < INT32_MIN || v > INT32_MAX)
                return MPI_ERR_CONVERSION;
            u[i] = (int)v;
        }
    }
    calls++;
    return MPI_SUCCESS;
}

static int rd(void *u, MPI_Datatype dt, int n, void *f, MPI_Offset p, void *x) { (void)x; return conv(u, dt, n, f, p, 0); }
static int wr(void *u, MPI_Datatype dt, int n, void *f, MPI_Offset p, void *x) { (void)x; return conv(u, dt, n, f, p, 1); }

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

/* Element k of a buffer of `type` (MPI_LONG or MPI_INT). */
static void put(void *buf, MPI_Datatype type, int k, long v)
{
    if (type == MPI_LONG)
        ((long *)buf)[k] = v;
    else
        ((int *)buf)[k] = (int)v;
}

static long get(const void *buf, MPI_Datatype type, int k)
{
    return type == MPI_LONG ? ((const long *)buf)[k] : ((const int *)buf)[k];
}

/* One round: the array of `type` written and read through darray views in `datarep`, where
 * the type takes `w` bytes in the file. */
static void round_trip(MPI_File fh, MPI_Datatype type, const char *datarep, int w)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int dims[2] = {0, 0};
    MPI_Dims_create(size, 2, dims);
    /* The grid is row-major whatever the array's order. */
    int c0 = rank / dims[1], c1 = rank % dims[1];
    int native;
    MPI_Type_size(type, &native);

    /* Writing: rows in blocks, columns cyclic by 2, C order. */
    int gs[2] = {GR, GC}, ds[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC};
    int da[2] = {MPI_DISTRIBUTE_DFLT_DARG, 2};
    MPI_Datatype wtype;
    CHECK_MPI(MPI_Type_create_darray(size, rank, 2, gs, ds, da, dims, MPI_ORDER_C, type, &wtype));
    MPI_Type_commit(&wtype);
    long mine_mem[GR * GC];
    void *mine = mine_mem;
    int n = 0, first = -1; /* first: the file element of local element 0 */
    for (int i = 0; i < GR; i++)
        for (int j = 0; j < GC; j++)
            if (owns(ds[0], da[0], GR, dims[0], c0, i) && owns(ds[1], da[1], GC, dims[1], c1, j)) {
                if (first < 0)
                    first = i * GC + j;
                put(mine, type, n++, val(i, j));
            }
    int tsize;
    MPI_Type_size(wtype, &tsize);
    CHECK(tsize == n * native, "%s: darray size %d, expected %d elements", datarep, tsize, n);
    CHECK_MPI(MPI_File_set_size(fh, 0));
    CHECK_MPI(MPI_File_set_view(fh, HEADER, type, wtype, datarep, MPI_INFO_NULL));
    MPI_Aint fext;
    CHECK_MPI(MPI_File_get_type_extent(fh, wtype, &fext));
    CHECK(fext == GR * GC * w, "%s: file extent of the darray: %ld, expected %d", datarep, (long)fext, GR * GC * w);
    MPI_Status st;
    CHECK_MPI(MPI_File_write_all(fh, mine, n, type, &st));
    int got;
    MPI_Get_count(&st, type, &got);
    CHECK(got == n, "%s: write_all count %d, expected %d", datarep, got, n);
    MPI_Offset pos, byte;
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK(pos == n, "%s: position after the write: %lld, expected %d", datarep, (long long)pos, n);
    if (n > 0) {
        CHECK_MPI(MPI_File_get_byte_offset(fh, 0, &byte));
        CHECK(byte == HEADER + w * first, "%s: byte offset of local element 0: %lld, expected %d", datarep, (long long)byte, HEADER + w * first);
    }
    CHECK_MPI(MPI_File_sync(fh));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_File_sync(fh));

    /* The bytes: the whole array row-major, w bytes big-endian each. */
    CHECK_MPI(MPI_File_get_size(fh, &byte));
    CHECK(byte == HEADER + GR * GC * w, "%s: file size %lld, expected %d", datarep, (long long)byte, HEADER + GR * GC * w);
    static unsigned char raw[GR * GC * 8];
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    CHECK_MPI(MPI_File_read_at(fh, HEADER, raw, GR * GC * w, MPI_BYTE, &st));
    for (int i = 0; i < GR; i++)
        for (int j = 0; j < GC; j++) {
            long f = be(raw + w * (i * GC + j), w);
            CHECK(f == val(i, j), "%s: file element (%d,%d): %ld, expected %ld", datarep, i, j, f, val(i, j));
        }

    /* Reading by another decomposition: Fortran order (columns, fastest, are dimension 0), the
     * grid transposed, columns in blocks and rows cyclic by 3. */
    int rgs[2] = {GC, GR}, rds[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC};
    int rda[2] = {MPI_DISTRIBUTE_DFLT_DARG, 3}, rdims[2] = {dims[1], dims[0]};
    int r0 = rank / rdims[1], r1 = rank % rdims[1];
    MPI_Datatype rtype;
    CHECK_MPI(MPI_Type_create_darray(size, rank, 2, rgs, rds, rda, rdims, MPI_ORDER_FORTRAN, type, &rtype));
    MPI_Type_commit(&rtype);
    long want[GR * GC], back_mem[GR * GC + 1];
    void *back = back_mem;
    int m = 0;
    /* Type-map order: dimension 0 (a column) fastest, so row-major over (row, column). */
    for (int i = 0; i < GR; i++)
        for (int j = 0; j < GC; j++)
            if (owns(rds[0], rda[0], GC, rdims[0], r0, j) && owns(rds[1], rda[1], GR, rdims[1], r1, i))
                want[m++] = val(i, j);
    CHECK_MPI(MPI_File_set_view(fh, HEADER, type, rtype, datarep, MPI_INFO_NULL));
    for (int k = 0; k <= GR * GC; k++)
        put(back, type, k, 77);
    CHECK_MPI(MPI_File_read_all(fh, back, m, type, &st));
    MPI_Get_count(&st, type, &got);
    CHECK(got == m, "%s: read_all count %d, expected %d", datarep, got, m);
    for (int k = 0; k < m; k++)
        CHECK(get(back, type, k) == want[k], "%s: read_all: local element %d is %ld, expected %ld", datarep, k, get(back, type, k), want[k]);
    CHECK(get(back, type, m) == 77, "%s: read_all wrote past its %d elements", datarep, m);
    /* The second half again, independently at an explicit offset in etypes. */
    int half = m / 2;
    for (int k = 0; k <= GR * GC; k++)
        put(back, type, k, 77);
    CHECK_MPI(MPI_File_read_at(fh, half, back, m - half, type, &st));
    MPI_Get_count(&st, type, &got);
    CHECK(got == m - half, "%s: read_at count %d, expected %d", datarep, got, m - half);
    for (int k = half; k < m; k++)
        CHECK(get(back, type, k - half) == want[k], "%s: read_at: local element %d is %ld, expected %ld", datarep, k, get(back, type, k - half), want[k]);
    MPI_Type_free(&wtype);
    MPI_Type_free(&rtype);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("io_external32_darray");
    CHECK_MPI(MPI_Register_datarep("be64int", rd, wr, extent, NULL));
    char path[256];
    io_path(path, sizeof path, "io_external32_darray");
    MPI_File fh;
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
    round_trip(fh, MPI_LONG, "external32", 4);
    round_trip(fh, MPI_INT, "be64int", 8);
    CHECK(calls > 0, "the be64int conversion functions were not called");
    CHECK_MPI(MPI_File_close(&fh));
    return test_end();
}
