/* User data representations (MPI_Register_datarep, _c) and MPI_DISPLACEMENT_CURRENT:
 * - "swap32" byte-swaps 4-byte items both ways: ints written through it are byte-swapped in
 *   the file (checked through a native view) and read back right; its callbacks see the
 *   user's datatype, count and position, and call MPI (MPI_Type_size) from inside;
 * - the same through MPI_Register_datarep_c's large-count callbacks, with collective forms;
 * - a name registered twice (or a predefined one) is MPI_ERR_DUP_DATAREP;
 * - a conversion callback's error code comes back from the read or write;
 * - MPI_CONVERSION_FN_NULL moves native bytes (file extents other than the native sizes:
 *   io_datarep_extent.c);
 * - MPI_DISPLACEMENT_CURRENT on an MPI_MODE_SEQUENTIAL file continues where the shared pointer
 *   stands; on another file it is MPI_ERR_ARG. */
#include <mpi.h>
#include "stormtest.h"
#include <stdint.h>
#include <string.h>
#include "io_common.h"

#define N 100

static int calls; /* conversion calls, counted through extra_state */

static uint32_t swap(uint32_t v) { return __builtin_bswap32(v); }

/* Swaps `count` 4-byte items between a contiguous buffer of MPI_INTs from item `position` and
 * filebuf; `dir` 1 converts user -> file. */
static int swap_items(void *userbuf, MPI_Datatype dt, MPI_Count count, void *filebuf,
                      MPI_Offset position, void *extra, int dir)
{
    int sz;
    if (MPI_Type_size(dt, &sz) != MPI_SUCCESS || sz != 4)
        return MPI_ERR_TYPE;
    uint32_t *u = (uint32_t *)userbuf + position, *f = filebuf;
    for (MPI_Count i = 0; i < count; i++) {
        if (dir)
            f[i] = swap(u[i]);
        else
            u[i] = swap(f[i]);
    }
    ++*(int *)extra;
    return MPI_SUCCESS;
}

static int rd(void *u, MPI_Datatype dt, int n, void *f, MPI_Offset p, void *x) { return swap_items(u, dt, n, f, p, x, 0); }
static int wr(void *u, MPI_Datatype dt, int n, void *f, MPI_Offset p, void *x) { return swap_items(u, dt, n, f, p, x, 1); }
static int rd_c(void *u, MPI_Datatype dt, MPI_Count n, void *f, MPI_Offset p, void *x) { return swap_items(u, dt, n, f, p, x, 0); }
static int wr_c(void *u, MPI_Datatype dt, MPI_Count n, void *f, MPI_Offset p, void *x) { return swap_items(u, dt, n, f, p, x, 1); }

static int extent(MPI_Datatype dt, MPI_Aint *ext, void *x)
{
    (void)x;
    int sz;
    int rc = MPI_Type_size(dt, &sz);
    *ext = sz;
    return rc;
}

static int failing(void *u, MPI_Datatype dt, int n, void *f, MPI_Offset p, void *x)
{
    (void)u; (void)dt; (void)n; (void)f; (void)p; (void)x;
    return MPI_ERR_CONVERSION;
}

static void expect_class(int rc, int want, const char *what)
{
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    CHECK(cls == want, "%s: error class %d, expected %d", what, cls, want);
}

static int val(int rank, int i) { return rank * 100000 + i * 7 + 1; }

/* Writes N ints at rank's place through view `rep` (collectively if `all`), checks the file's
 * bytes through a native view (swapped or not), reads them back through `rep`. */
static void round_trip(MPI_File fh, const char *rep, int all, int swapped)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int buf[N], back[N];
    for (int i = 0; i < N; i++)
        buf[i] = val(rank, i);
    MPI_Status st;
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, rep, MPI_INFO_NULL));
    char name[MPI_MAX_DATAREP_STRING];
    MPI_Offset d;
    MPI_Datatype et, ft;
    CHECK_MPI(MPI_File_get_view(fh, &d, &et, &ft, name));
    CHECK(strcmp(name, rep) == 0, "get_view names %s, expected %s", name, rep);
    if (all)
        CHECK_MPI(MPI_File_write_at_all(fh, (MPI_Offset)rank * N, buf, N, MPI_INT, &st));
    else
        CHECK_MPI(MPI_File_write_at(fh, (MPI_Offset)rank * N, buf, N, MPI_INT, &st));
    int got;
    MPI_Get_count(&st, MPI_INT, &got);
    CHECK(got == N, "%s: wrote %d ints", rep, got);
    CHECK_MPI(MPI_File_sync(fh));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_File_sync(fh));

    /* The file's bytes, as native ints: the neighbour's region. */
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int other = (rank + 1) % size;
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
    CHECK_MPI(MPI_File_read_at(fh, (MPI_Offset)other * N, back, N, MPI_INT, &st));
    for (int i = 0; i < N; i++) {
        uint32_t want = (uint32_t)val(other, i);
        if (swapped)
            want = swap(want);
        CHECK((uint32_t)back[i] == want, "%s: file int %d of rank %d is %08x, expected %08x",
              rep, i, other, (uint32_t)back[i], want);
    }

    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, rep, MPI_INFO_NULL));
    memset(back, 0, sizeof back);
    if (all)
        CHECK_MPI(MPI_File_read_at_all(fh, (MPI_Offset)other * N, back, N, MPI_INT, &st));
    else
        CHECK_MPI(MPI_File_read_at(fh, (MPI_Offset)other * N, back, N, MPI_INT, &st));
    MPI_Get_count(&st, MPI_INT, &got);
    CHECK(got == N, "%s: read %d ints", rep, got);
    for (int i = 0; i < N; i++)
        CHECK(back[i] == val(other, i), "%s: read back %d at %d, expected %d", rep, back[i], i,
              val(other, i));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

static void displacement_current(void)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char path[256];
    io_path(path, sizeof path, "io_datarep_seq");
    MPI_File fh;
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY | MPI_MODE_SEQUENTIAL, MPI_INFO_NULL, &fh));
    /* A header of 3 bytes, then 2 ints per rank in rank order, then (after the view moves
     * to where the shared pointer stands) 1 int per rank. */
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    MPI_Status st;
    if (rank == 0)
        CHECK_MPI(MPI_File_write_shared(fh, "HDR", 3, MPI_CHAR, &st));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_File_set_view(fh, MPI_DISPLACEMENT_CURRENT, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
    MPI_Offset d;
    MPI_Datatype et, ft;
    char rep[MPI_MAX_DATAREP_STRING];
    CHECK_MPI(MPI_File_get_view(fh, &d, &et, &ft, rep));
    CHECK(d == 3, "MPI_DISPLACEMENT_CURRENT after the header: displacement %lld", (long long)d);
    int two[2] = {val(rank, 0), val(rank, 1)};
    CHECK_MPI(MPI_File_write_ordered(fh, two, 2, MPI_INT, &st));
    CHECK_MPI(MPI_File_set_view(fh, MPI_DISPLACEMENT_CURRENT, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
    CHECK_MPI(MPI_File_get_view(fh, &d, &et, &ft, rep));
    CHECK(d == 3 + 8 * (MPI_Offset)size, "MPI_DISPLACEMENT_CURRENT after the ints: displacement %lld", (long long)d);
    int one = val(rank, 2);
    CHECK_MPI(MPI_File_write_ordered(fh, &one, 1, MPI_INT, &st));
    CHECK_MPI(MPI_File_close(&fh));

    if (rank == 0) {
        CHECK_MPI(MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDONLY | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
        char all[3 + 12 * 64];
        int n = 3 + 12 * size;
        CHECK_MPI(MPI_File_read_at(fh, 0, all, n, MPI_BYTE, &st));
        CHECK(memcmp(all, "HDR", 3) == 0, "header lost");
        for (int r = 0; r < size; r++) {
            int v[3];
            memcpy(&v[0], all + 3 + 8 * r, 8);
            memcpy(&v[2], all + 3 + 8 * size + 4 * r, 4);
            for (int k = 0; k < 3; k++)
                CHECK(v[k] == val(r, k), "sequential file: int %d of rank %d is %d", k, r, v[k]);
        }
        CHECK_MPI(MPI_File_close(&fh));
    }

    /* Not a sequential file: an argument error. */
    io_path(path, sizeof path, "io_datarep_nonseq");
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
    expect_class(MPI_File_set_view(fh, MPI_DISPLACEMENT_CURRENT, MPI_INT, MPI_INT, "native", MPI_INFO_NULL),
                 MPI_ERR_ARG, "MPI_DISPLACEMENT_CURRENT without MPI_MODE_SEQUENTIAL");
    CHECK_MPI(MPI_File_close(&fh));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("io_datarep");
    CHECK_MPI(MPI_Register_datarep("swap32", rd, wr, extent, &calls));
    CHECK_MPI(MPI_Register_datarep_c("swap32c", rd_c, wr_c, extent, &calls));
    CHECK_MPI(MPI_Register_datarep("plain", MPI_CONVERSION_FN_NULL, MPI_CONVERSION_FN_NULL, extent, NULL));
    CHECK_MPI(MPI_Register_datarep("failing", failing, failing, extent, NULL));
    expect_class(MPI_Register_datarep("swap32", rd, wr, extent, NULL), MPI_ERR_DUP_DATAREP,
                 "registering swap32 twice");
    expect_class(MPI_Register_datarep("external32", rd, wr, extent, NULL), MPI_ERR_DUP_DATAREP,
                 "registering external32");

    char path[256];
    io_path(path, sizeof path, "io_datarep");
    MPI_File fh;
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
    round_trip(fh, "swap32", 0, 1);
    CHECK(calls >= 2, "the conversion functions were called %d times", calls);
    int before = calls;
    round_trip(fh, "swap32c", 1, 1);
    CHECK(calls >= before + 2, "the large-count conversion functions were not called");
    before = calls;
    round_trip(fh, "plain", 1, 0);
    CHECK(calls == before, "MPI_CONVERSION_FN_NULL called a conversion");

    /* The callback's error code is the access's. */
    int rank, buf[N] = {0};
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Status st;
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "failing", MPI_INFO_NULL));
    expect_class(MPI_File_write_at(fh, (MPI_Offset)rank * N, buf, N, MPI_INT, &st),
                 MPI_ERR_CONVERSION, "a failing write conversion");
    expect_class(MPI_File_read_at(fh, (MPI_Offset)rank * N, buf, N, MPI_INT, &st),
                 MPI_ERR_CONVERSION, "a failing read conversion");
    expect_class(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "nosuchrep", MPI_INFO_NULL),
                 MPI_ERR_UNSUPPORTED_DATAREP, "an unknown representation");
    CHECK_MPI(MPI_File_close(&fh));

    displacement_current();
    return test_end();
}
