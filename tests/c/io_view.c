/* File views: a subarray filetype (each rank a column block of a 2-D array) written
 * collectively, checked byte by byte through the plain byte view; a vector view with a
 * displacement read back in another decomposition; get_view/get_byte_offset/get_type_extent;
 * a struct filetype with holes left untouched. */
#include <mpi.h>
#include "stormtest.h"
#include "io_common.h"

#define NR 37
#define W 5 /* columns per rank */
#define HDR 64

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("io_view");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char path[256];
    io_path(path, sizeof path, "io_view");
    const int NC = W * size;

    MPI_File fh;
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));

    /* 1. subarray view, collective write. */
    int gsizes[2] = {NR, NC}, lsizes[2] = {NR, W}, starts[2] = {0, rank * W};
    MPI_Datatype sub;
    MPI_Type_create_subarray(2, gsizes, lsizes, starts, MPI_ORDER_C, MPI_INT, &sub);
    MPI_Type_commit(&sub);
    CHECK_MPI(MPI_File_set_view(fh, HDR, MPI_INT, sub, "native", MPI_INFO_NULL));
    int local[NR * W];
    for (int i = 0; i < NR; i++)
        for (int j = 0; j < W; j++)
            local[i * W + j] = i * NC + rank * W + j;
    MPI_Status st;
    CHECK_MPI(MPI_File_write_all(fh, local, NR * W, MPI_INT, &st));
    int cnt;
    MPI_Get_count(&st, MPI_INT, &cnt);
    CHECK(cnt == NR * W, "write_all count %d", cnt);

    MPI_Offset disp;
    MPI_Datatype et, ft;
    char rep[MPI_MAX_DATAREP_STRING];
    CHECK_MPI(MPI_File_get_view(fh, &disp, &et, &ft, rep));
    CHECK(disp == HDR && et == MPI_INT && strcmp(rep, "native") == 0, "get_view: %lld %s", (long long)disp, rep);
    int fts;
    MPI_Type_size(ft, &fts);
    CHECK(fts == NR * W * 4, "view filetype size %d", fts);
    MPI_Type_free(&ft);
    MPI_Offset boff;
    CHECK_MPI(MPI_File_get_byte_offset(fh, W + 1, &boff));
    CHECK(boff == HDR + (MPI_Offset)(NC + rank * W + 1) * 4, "byte offset %lld", (long long)boff);
    MPI_Aint ext;
    CHECK_MPI(MPI_File_get_type_extent(fh, sub, &ext));
    CHECK(ext == (MPI_Aint)NR * NC * 4, "type extent %ld", (long)ext);

    /* Check the whole file through the byte view. */
    CHECK_MPI(MPI_File_sync(fh));
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    int *all = test_malloc((size_t)NR * NC * sizeof(int));
    CHECK_MPI(MPI_File_read_at(fh, HDR, all, NR * NC, MPI_INT, &st));
    MPI_Get_count(&st, MPI_INT, &cnt);
    CHECK(cnt == NR * NC, "read back count %d", cnt);
    for (int k = 0; k < NR * NC; k++)
        CHECK(all[k] == k, "global element %d is %d", k, all[k]);

    /* 2. another decomposition: rank r reads rows r, r+size, ... through a vector view, with
     * the individual pointer, in two halves (the second continues inside the pattern). */
    MPI_Datatype rows, rowsr;
    MPI_Type_vector(1, NC, NC * size, MPI_INT, &rows);
    MPI_Type_create_resized(rows, 0, (MPI_Aint)NC * size * 4, &rowsr);
    MPI_Type_commit(&rowsr);
    CHECK_MPI(MPI_File_set_view(fh, HDR + (MPI_Offset)rank * NC * 4, MPI_INT, rowsr, "native", MPI_INFO_NULL));
    int myrows = 0;
    for (int i = rank; i < NR; i += size)
        myrows++;
    int *mine = test_malloc((size_t)myrows * NC * sizeof(int) + 4);
    int half = myrows * NC / 2;
    CHECK_MPI(MPI_File_read_all(fh, mine, half, MPI_INT, &st));
    CHECK_MPI(MPI_File_read_all(fh, mine + half, myrows * NC - half, MPI_INT, &st));
    for (int q = 0; q < myrows; q++)
        for (int j = 0; j < NC; j++)
            CHECK(mine[q * NC + j] == (rank + q * size) * NC + j, "row %d col %d: %d", rank + q * size, j, mine[q * NC + j]);

    /* 3. a struct filetype with holes: two ints at byte 0 and 12 of a 20-byte extent. Writing
     * through it must leave the holes as they were. */
    MPI_Barrier(MPI_COMM_WORLD);
    int bl[2] = {1, 1};
    MPI_Aint dp[2] = {0, 12};
    MPI_Datatype ty[2] = {MPI_INT, MPI_INT}, st2, holes;
    MPI_Type_create_struct(2, bl, dp, ty, &st2);
    MPI_Type_create_resized(st2, 0, 20, &holes);
    MPI_Type_commit(&holes);
    MPI_Offset region = HDR + (MPI_Offset)NR * NC * 4 + (MPI_Offset)rank * 20 * 8;
    int fill[40];
    for (int i = 0; i < 40; i++)
        fill[i] = -1;
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    CHECK_MPI(MPI_File_write_at(fh, region, fill, 40, MPI_INT, &st));
    CHECK_MPI(MPI_File_set_view(fh, region, MPI_INT, holes, "native", MPI_INFO_NULL));
    int vals[16];
    for (int i = 0; i < 16; i++)
        vals[i] = 100 * rank + i;
    CHECK_MPI(MPI_File_write_at_all(fh, 0, vals, 16, MPI_INT, &st));
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    CHECK_MPI(MPI_File_read_at(fh, region, fill, 40, MPI_INT, &st));
    for (int k = 0; k < 8; k++) {
        CHECK(fill[5 * k] == 100 * rank + 2 * k, "struct view tile %d first int %d", k, fill[5 * k]);
        CHECK(fill[5 * k + 3] == 100 * rank + 2 * k + 1, "struct view tile %d second int %d", k, fill[5 * k + 3]);
        CHECK(fill[5 * k + 1] == -1 && fill[5 * k + 2] == -1 && fill[5 * k + 4] == -1, "a hole of tile %d was written", k);
    }

    CHECK_MPI(MPI_File_close(&fh));
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        CHECK_MPI(MPI_File_delete(path, MPI_INFO_NULL));
    MPI_Type_free(&sub);
    MPI_Type_free(&rows);
    MPI_Type_free(&rowsr);
    MPI_Type_free(&st2);
    MPI_Type_free(&holes);
    free(all);
    free(mine);
    return test_end();
}
