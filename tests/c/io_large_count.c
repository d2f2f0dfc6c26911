/* The large-count MPI-IO forms (MPI_File_*_c): every data-access function with an MPI_Count
 * count, checked against the file's bytes and the status's counts (MPI_Get_count_c), through a
 * strided view and a non-contiguous memory type; MPI_File_get_type_extent_c; a negative count
 * is MPI_ERR_COUNT. */
#include <mpi.h>
#include "stormtest.h"
#include "io_common.h"

#define N 300 /* ints per rank per access */

static void expect_count(MPI_Status *st, MPI_Count want, const char *what)
{
    MPI_Count got;
    MPI_Get_count_c(st, MPI_INT, &got);
    CHECK(got == want, "%s: count %lld, expected %lld", what, (long long)got, (long long)want);
}

/* Value of int i (in file order) of region `r`. */
static int val(int r, long i) { return r * 1000000 + (int)i; }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("io_large_count");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char path[256];
    io_path(path, sizeof path, "io_large_count");
    MPI_File fh;
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));

    /* Region r of the file (N*size ints each) is written by one form; in it rank k owns
     * ints k, k+size, k+2*size, ... through a vector view. */
    MPI_Datatype ft, strided;
    MPI_Type_vector(1, 1, size, MPI_INT, &ft);
    MPI_Type_create_resized(ft, 0, (MPI_Aint)size * 4, &strided);
    MPI_Type_commit(&strided);
    MPI_Type_free(&ft);
    /* Memory: every other int of a buffer twice as long (non-contiguous). */
    MPI_Datatype memt;
    MPI_Type_vector(N, 1, 2, MPI_INT, &memt);
    MPI_Type_commit(&memt);
    int *buf = test_malloc(sizeof(int) * 2 * N);
    int *back = test_malloc(sizeof(int) * 2 * N);
    MPI_Status st;
    MPI_Request req;
    const MPI_Offset region = (MPI_Offset)N * size * 4;

#define FILL(r)                                                                                \
    for (long i = 0; i < 2 * N; i++)                                                           \
        buf[i] = (i % 2) ? -1 : val((r), (long)(i / 2) * size + rank);
#define VIEW(r) CHECK_MPI(MPI_File_set_view(fh, (r) * region + rank * 4, MPI_INT, strided, "native", MPI_INFO_NULL))

    /* Region 0: write_at_c (offset 0), 1: write_at_all_c, 2: write_c, 3: write_all_c,
     * 4: iwrite_at_c, 5: iwrite_all_c, 6: write_all_begin_c/end, 7: write_at_all_begin_c/end,
     * 8: iwrite_c, 9: iwrite_at_all_c. */
    FILL(0); VIEW(0);
    CHECK_MPI(MPI_File_write_at_c(fh, 0, buf, 1, memt, &st)); expect_count(&st, N, "write_at_c");
    FILL(1); VIEW(1);
    CHECK_MPI(MPI_File_write_at_all_c(fh, 0, buf, 1, memt, &st)); expect_count(&st, N, "write_at_all_c");
    FILL(2); VIEW(2);
    CHECK_MPI(MPI_File_write_c(fh, buf, 1, memt, &st)); expect_count(&st, N, "write_c");
    FILL(3); VIEW(3);
    CHECK_MPI(MPI_File_write_all_c(fh, buf, 1, memt, &st)); expect_count(&st, N, "write_all_c");
    FILL(4); VIEW(4);
    CHECK_MPI(MPI_File_iwrite_at_c(fh, 0, buf, 1, memt, &req)); CHECK_MPI(MPI_Wait(&req, &st));
    expect_count(&st, N, "iwrite_at_c");
    FILL(5); VIEW(5);
    CHECK_MPI(MPI_File_iwrite_all_c(fh, buf, 1, memt, &req)); CHECK_MPI(MPI_Wait(&req, &st));
    expect_count(&st, N, "iwrite_all_c");
    FILL(6); VIEW(6);
    CHECK_MPI(MPI_File_write_all_begin_c(fh, buf, 1, memt));
    CHECK_MPI(MPI_File_write_all_end(fh, buf, &st)); expect_count(&st, N, "write_all_begin_c");
    FILL(7); VIEW(7);
    CHECK_MPI(MPI_File_write_at_all_begin_c(fh, 0, buf, 1, memt));
    CHECK_MPI(MPI_File_write_at_all_end(fh, buf, &st)); expect_count(&st, N, "write_at_all_begin_c");
    FILL(8); VIEW(8);
    CHECK_MPI(MPI_File_iwrite_c(fh, buf, 1, memt, &req)); CHECK_MPI(MPI_Wait(&req, &st));
    expect_count(&st, N, "iwrite_c");
    FILL(9); VIEW(9);
    CHECK_MPI(MPI_File_iwrite_at_all_c(fh, 0, buf, 1, memt, &req)); CHECK_MPI(MPI_Wait(&req, &st));
    expect_count(&st, N, "iwrite_at_all_c");
    /* Region 10: the shared pointer, each rank N contiguous ints (order free, content
     * self-describing); 11: ordered (rank order). */
    CHECK_MPI(MPI_File_set_view(fh, 10 * region, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
    for (long i = 0; i < N; i++)
        buf[i] = val(10, (long)rank * N + i);
    CHECK_MPI(MPI_File_write_shared_c(fh, buf, N, MPI_INT, &st)); expect_count(&st, N, "write_shared_c");
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_MPI(MPI_File_set_view(fh, 11 * region, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
    for (long i = 0; i < N; i++)
        buf[i] = val(11, (long)rank * N + i);
    CHECK_MPI(MPI_File_write_ordered_c(fh, buf, N, MPI_INT, &st)); expect_count(&st, N, "write_ordered_c");
    CHECK_MPI(MPI_File_sync(fh));

    /* The file, through the byte view: regions 0-9 and 11 in file order. */
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    int *all = test_malloc((size_t)region * 12);
    CHECK_MPI(MPI_File_read_at_c(fh, 0, all, (MPI_Count)region * 12, MPI_BYTE, &st));
    MPI_Count bytes;
    MPI_Get_count_c(&st, MPI_BYTE, &bytes);
    CHECK(bytes == region * 12, "read %lld bytes", (long long)bytes);
    for (int r = 0; r < 12; r++) {
        if (r == 10)
            continue;
        for (long i = 0; i < (long)N * size; i++) {
            int got = all[r * (long)N * size + i];
            if (got != val(r, i)) {
                FAIL("region %d int %ld: %d, expected %d", r, i, got, val(r, i));
                break;
            }
        }
    }
    /* Region 10: every rank's N ints appear once, as a block. */
    for (int k = 0; k < size; k++) {
        int *blk = all + 10 * (long)N * size + (long)k * N;
        int owner = (blk[0] - val(10, 0)) / N;
        CHECK(owner >= 0 && owner < size, "shared block %d starts with %d", k, blk[0]);
        for (long i = 0; i < N; i++)
            if (blk[i] != val(10, (long)owner * N + i)) {
                FAIL("shared block %d int %ld: %d", k, i, blk[i]);
                break;
            }
    }
    free(all);

    /* Reads, each form through the strided view into the non-contiguous memory type. */
#define CHECK_BACK(r, what)                                                                    \
    for (long i = 0; i < N; i++)                                                               \
        if (back[2 * i] != val((r), i * size + rank) || back[2 * i + 1] != -7) {               \
            FAIL("%s: int %ld is %d (gap %d)", what, i, back[2 * i], back[2 * i + 1]);         \
            break;                                                                             \
        }
#define CLEAR() for (long i = 0; i < 2 * N; i++) back[i] = -7;
    CLEAR(); VIEW(0);
    CHECK_MPI(MPI_File_read_at_c(fh, 0, back, 1, memt, &st)); expect_count(&st, N, "read_at_c");
    CHECK_BACK(0, "read_at_c");
    CLEAR(); VIEW(1);
    CHECK_MPI(MPI_File_read_at_all_c(fh, 0, back, 1, memt, &st)); expect_count(&st, N, "read_at_all_c");
    CHECK_BACK(1, "read_at_all_c");
    CLEAR(); VIEW(2);
    CHECK_MPI(MPI_File_read_c(fh, back, 1, memt, &st)); expect_count(&st, N, "read_c");
    CHECK_BACK(2, "read_c");
    CLEAR(); VIEW(3);
    CHECK_MPI(MPI_File_read_all_c(fh, back, 1, memt, &st)); expect_count(&st, N, "read_all_c");
    CHECK_BACK(3, "read_all_c");
    CLEAR(); VIEW(4);
    CHECK_MPI(MPI_File_iread_at_c(fh, 0, back, 1, memt, &req)); CHECK_MPI(MPI_Wait(&req, &st));
    expect_count(&st, N, "iread_at_c"); CHECK_BACK(4, "iread_at_c");
    CLEAR(); VIEW(5);
    CHECK_MPI(MPI_File_iread_all_c(fh, back, 1, memt, &req)); CHECK_MPI(MPI_Wait(&req, &st));
    expect_count(&st, N, "iread_all_c"); CHECK_BACK(5, "iread_all_c");
    CLEAR(); VIEW(6);
    CHECK_MPI(MPI_File_read_all_begin_c(fh, back, 1, memt));
    CHECK_MPI(MPI_File_read_all_end(fh, back, &st)); expect_count(&st, N, "read_all_begin_c");
    CHECK_BACK(6, "read_all_begin_c");
    CLEAR(); VIEW(7);
    CHECK_MPI(MPI_File_read_at_all_begin_c(fh, 0, back, 1, memt));
    CHECK_MPI(MPI_File_read_at_all_end(fh, back, &st)); expect_count(&st, N, "read_at_all_begin_c");
    CHECK_BACK(7, "read_at_all_begin_c");
    CLEAR(); VIEW(8);
    CHECK_MPI(MPI_File_iread_c(fh, back, 1, memt, &req)); CHECK_MPI(MPI_Wait(&req, &st));
    expect_count(&st, N, "iread_c"); CHECK_BACK(8, "iread_c");
    CLEAR(); VIEW(9);
    CHECK_MPI(MPI_File_iread_at_all_c(fh, 0, back, 1, memt, &req)); CHECK_MPI(MPI_Wait(&req, &st));
    expect_count(&st, N, "iread_at_all_c"); CHECK_BACK(9, "iread_at_all_c");

    /* Ordered read of region 11: rank k gets block k. */
    CHECK_MPI(MPI_File_set_view(fh, 11 * region, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
    CHECK_MPI(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    CHECK_MPI(MPI_File_read_ordered_c(fh, back, N, MPI_INT, &st)); expect_count(&st, N, "read_ordered_c");
    for (long i = 0; i < N; i++)
        if (back[i] != val(11, (long)rank * N + i)) {
            FAIL("read_ordered_c int %ld: %d", i, back[i]);
            break;
        }
    CHECK_MPI(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    CHECK_MPI(MPI_File_read_ordered_begin_c(fh, back, N, MPI_INT));
    CHECK_MPI(MPI_File_read_ordered_end(fh, back, &st)); expect_count(&st, N, "read_ordered_begin_c");
    CHECK(back[N - 1] == val(11, (long)rank * N + N - 1), "read_ordered_begin_c: %d", back[N - 1]);
    /* Shared reads: each rank one int of region 11 (any), then its iread form. */
    CHECK_MPI(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    CHECK_MPI(MPI_File_read_shared_c(fh, back, 1, MPI_INT, &st)); expect_count(&st, 1, "read_shared_c");
    CHECK(back[0] >= val(11, 0) && back[0] < val(11, (long)size), "read_shared_c: %d", back[0]);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_MPI(MPI_File_iread_shared_c(fh, back, 1, MPI_INT, &req)); CHECK_MPI(MPI_Wait(&req, &st));
    expect_count(&st, 1, "iread_shared_c");
    CHECK(back[0] >= val(11, (long)size) && back[0] < val(11, 2L * size), "iread_shared_c: %d", back[0]);
    MPI_Barrier(MPI_COMM_WORLD);
    /* iwrite_shared_c: each rank one int after the 2*size read. */
    int mark = val(12, rank);
    CHECK_MPI(MPI_File_iwrite_shared_c(fh, &mark, 1, MPI_INT, &req)); CHECK_MPI(MPI_Wait(&req, &st));
    expect_count(&st, 1, "iwrite_shared_c");
    /* Write_ordered_begin_c: rank k one int at 3*size + k. */
    CHECK_MPI(MPI_File_write_ordered_begin_c(fh, &mark, 1, MPI_INT));
    CHECK_MPI(MPI_File_write_ordered_end(fh, &mark, &st)); expect_count(&st, 1, "write_ordered_begin_c");
    CHECK_MPI(MPI_File_sync(fh));
    int got;
    CHECK_MPI(MPI_File_read_at_c(fh, 3 * size + rank, &got, 1, MPI_INT, &st));
    CHECK(got == mark, "write_ordered_begin_c put %d at %d", got, 3 * size + rank);

    /* get_type_extent_c, and a negative count. */
    MPI_Count ext;
    CHECK_MPI(MPI_File_get_type_extent_c(fh, memt, &ext));
    CHECK(ext == (MPI_Count)(2 * N - 1) * 4, "get_type_extent_c %lld", (long long)ext);
    int rc = MPI_File_write_at_c(fh, 0, buf, -1, MPI_INT, &st);
    int cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COUNT, "negative count: class %d", cls);

    MPI_Type_free(&strided);
    MPI_Type_free(&memt);
    free(buf);
    free(back);
    CHECK_MPI(MPI_File_close(&fh));
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        MPI_File_delete(path, MPI_INFO_NULL);
    return test_end();
}
