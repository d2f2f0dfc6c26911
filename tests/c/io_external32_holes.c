/* external32 views of types that change size (MPI_LONG: 8 bytes natively on LP64, 4 in
 * external32) in filetypes with holes:
 * - a struct etype {char at 0; long at 2; int at 8} (byte displacements are file bytes, as
 *   MPI says; its file extent is 12, no padding) tiled by a vector filetype interleaving the
 *   ranks' records (the vector's stride counts etypes: scaled by the file extent), written
 *   collectively from native structs; the file's bytes: the char, the long and the int
 *   big-endian where the layout puts them, the holes (bytes 1, 6, 7 of each record) untouched;
 *   the same read back through a native view of the equivalent layout ({char at 0; int at 2;
 *   int at 8}), and through the external32 view into native structs;
 * - a vector filetype of longs with holes (etype MPI_LONG): every other 4-byte slot. */
#include <mpi.h>
#include "stormtest.h"
#include <stddef.h>
#include <string.h>
#include "io_common.h"

#define K 10 /* records per rank */
#define REC 12 /* external32 bytes of one record's extent */
#define FILL 0xEE

struct rec {
    char c;
    long l;
    int i;
};

static struct rec val(int rank, int k)
{
    struct rec r = {(char)('a' + rank * K + k), (k % 2 ? -1L : 1L) * (rank * 100000L + k * 11 + 1), rank * 1000 - k * 3};
    return r;
}

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
    test_begin("io_external32_holes");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int other = (rank + 1) % size;
    char path[256];
    io_path(path, sizeof path, "io_external32_holes");
    MPI_File fh;
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
    const MPI_Offset region = (MPI_Offset)size * K * REC;
    const MPI_Offset total = region + (MPI_Offset)size * K * 8;

    /* Every byte starts as FILL, so the holes can be seen. */
    unsigned char fill[512];
    memset(fill, FILL, sizeof fill);
    if (rank == 0)
        for (MPI_Offset at = 0; at < total; at += (MPI_Offset)sizeof fill) {
            int n = total - at < (MPI_Offset)sizeof fill ? (int)(total - at) : (int)sizeof fill;
            CHECK_MPI(MPI_File_write_at(fh, at, fill, n, MPI_BYTE, MPI_STATUS_IGNORE));
        }
    CHECK_MPI(MPI_File_sync(fh));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_File_sync(fh));

    /* The memory record, native, and the file record, in external32 bytes. */
    MPI_Datatype mem, memrec, frec, ftype, types[3] = {MPI_CHAR, MPI_LONG, MPI_INT};
    int ones[3] = {1, 1, 1};
    MPI_Aint mdisp[3] = {offsetof(struct rec, c), offsetof(struct rec, l), offsetof(struct rec, i)};
    MPI_Aint fdisp[3] = {0, 2, 8};
    MPI_Type_create_struct(3, ones, mdisp, types, &mem);
    MPI_Type_create_resized(mem, 0, sizeof(struct rec), &memrec);
    MPI_Type_commit(&memrec);
    MPI_Type_create_struct(3, ones, fdisp, types, &frec);
    MPI_Type_commit(&frec);
    MPI_Type_vector(K, 1, size, frec, &ftype);
    MPI_Type_commit(&ftype);

    struct rec recs[K], back[K];
    for (int k = 0; k < K; k++)
        recs[k] = val(rank, k);
    MPI_Status st;
    CHECK_MPI(MPI_File_set_view(fh, (MPI_Offset)rank * REC, frec, ftype, "external32", MPI_INFO_NULL));
    MPI_Aint fext;
    CHECK_MPI(MPI_File_get_type_extent(fh, frec, &fext));
    CHECK(fext == REC, "external32 file extent of the record: %ld", (long)fext);
    CHECK_MPI(MPI_File_get_type_extent(fh, ftype, &fext));
    CHECK(fext == ((K - 1) * size + 1) * REC, "external32 file extent of the filetype: %ld", (long)fext);
    CHECK_MPI(MPI_File_write_all(fh, recs, K, memrec, &st));
    expect_count(&st, memrec, K, "write_all");
    MPI_Offset pos, byte;
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK(pos == K, "position after the write: %lld", (long long)pos);
    CHECK_MPI(MPI_File_get_byte_offset(fh, 2, &byte));
    CHECK(byte == (MPI_Offset)rank * REC + 2 * size * REC, "byte offset of record 2: %lld", (long long)byte);

    /* Region 1: longs in every other 4-byte slot. */
    MPI_Datatype lvec;
    MPI_Type_vector(K, 1, 2, MPI_LONG, &lvec);
    MPI_Type_commit(&lvec);
    long lv[K], lb[K];
    for (int k = 0; k < K; k++)
        lv[k] = -(long)(rank * 5000 + k * 17 + 2);
    CHECK_MPI(MPI_File_set_view(fh, region + (MPI_Offset)rank * K * 8, MPI_LONG, lvec, "external32", MPI_INFO_NULL));
    CHECK_MPI(MPI_File_write_at(fh, 0, lv, K, MPI_LONG, &st));
    expect_count(&st, MPI_LONG, K, "write_at of longs");
    CHECK_MPI(MPI_File_sync(fh));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_File_sync(fh));

    /* The bytes of the neighbour's records and longs. */
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    unsigned char raw[REC];
    for (int k = 0; k < K; k++) {
        struct rec w = val(other, k);
        CHECK_MPI(MPI_File_read_at(fh, (MPI_Offset)(k * size + other) * REC, raw, REC, MPI_BYTE, &st));
        CHECK(raw[0] == (unsigned char)w.c && be32(raw + 2) == (int)w.l && be32(raw + 8) == w.i,
              "record %d of rank %d in the file: %02x %d %d", k, other, raw[0], be32(raw + 2), be32(raw + 8));
        CHECK(raw[1] == FILL && raw[6] == FILL && raw[7] == FILL, "holes of record %d of rank %d: %02x %02x %02x", k, other, raw[1], raw[6], raw[7]);
    }
    unsigned char lraw[K * 8];
    CHECK_MPI(MPI_File_read_at(fh, region + (MPI_Offset)other * K * 8, lraw, K * 8, MPI_BYTE, &st));
    for (int k = 0; k < K; k++) {
        long w = -(long)(other * 5000 + k * 17 + 2);
        CHECK(be32(lraw + 8 * k) == (int)w, "long %d of rank %d in the file: %d", k, other, be32(lraw + 8 * k));
        CHECK(lraw[8 * k + 4] == FILL && lraw[8 * k + 7] == FILL, "hole after long %d of rank %d", k, other);
    }

    /* A native view of the equivalent layout: {char at 0; int at 2; int at 8}, as bytes. */
    MPI_Datatype nrec, nftype, ntypes[3] = {MPI_BYTE, MPI_BYTE, MPI_BYTE};
    int nlens[3] = {1, 4, 4};
    MPI_Type_create_struct(3, nlens, fdisp, ntypes, &nrec);
    MPI_Type_create_resized(nrec, 0, REC, &nftype);
    MPI_Datatype nview;
    MPI_Type_vector(K, 1, size, nftype, &nview);
    MPI_Type_commit(&nview);
    unsigned char packed[K * 9];
    CHECK_MPI(MPI_File_set_view(fh, (MPI_Offset)other * REC, MPI_BYTE, nview, "native", MPI_INFO_NULL));
    /* Collective: its piece lists cross ranks of both byte orders when tests/tests/hetero.rs
     * runs this program in a mixed job. */
    CHECK_MPI(MPI_File_read_at_all(fh, 0, packed, K * 9, MPI_BYTE, &st));
    for (int k = 0; k < K; k++) {
        struct rec w = val(other, k);
        const unsigned char *p = packed + 9 * k;
        CHECK(p[0] == (unsigned char)w.c && be32(p + 1) == (int)w.l && be32(p + 5) == w.i,
              "record %d of rank %d through the native view: %02x %d %d", k, other, p[0], be32(p + 1), be32(p + 5));
    }

    /* Back through external32 into native structs, and the longs into a contiguous array. */
    memset(back, 0, sizeof back);
    CHECK_MPI(MPI_File_set_view(fh, (MPI_Offset)other * REC, frec, ftype, "external32", MPI_INFO_NULL));
    CHECK_MPI(MPI_File_read_all(fh, back, K, memrec, &st));
    expect_count(&st, memrec, K, "read_all");
    for (int k = 0; k < K; k++) {
        struct rec w = val(other, k);
        CHECK(back[k].c == w.c && back[k].l == w.l && back[k].i == w.i, "record %d of rank %d read back as %d %ld %d", k, other, back[k].c, back[k].l, back[k].i);
    }
    CHECK_MPI(MPI_File_set_view(fh, region + (MPI_Offset)other * K * 8, MPI_LONG, lvec, "external32", MPI_INFO_NULL));
    CHECK_MPI(MPI_File_read_at(fh, 0, lb, K, MPI_LONG, &st));
    expect_count(&st, MPI_LONG, K, "read_at of longs");
    for (int k = 0; k < K; k++)
        CHECK(lb[k] == -(long)(other * 5000 + k * 17 + 2), "long %d of rank %d read back as %ld", k, other, lb[k]);

    CHECK_MPI(MPI_File_close(&fh));
    MPI_Type_free(&mem);
    MPI_Type_free(&memrec);
    MPI_Type_free(&frec);
    MPI_Type_free(&ftype);
    MPI_Type_free(&lvec);
    MPI_Type_free(&nrec);
    MPI_Type_free(&nftype);
    MPI_Type_free(&nview);
    return test_end();
}
