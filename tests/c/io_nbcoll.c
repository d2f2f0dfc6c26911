/* Non-blocking collective MPI-IO with collective buffering: every rank's data interleaved in
 * the file in pieces of 16 ints (so two-phase is what the accesses need; the hints also force
 * it, with two aggregators and windows smaller than a region, so each access takes several
 * rounds). Several MPI_File_iwrite_at_all in flight at once, one rank computing (no MPI calls)
 * between their start and its wait; MPI_File_iread_at_all completed with MPI_Testany; split
 * collectives (write_all_begin/end, read_all_begin/end) mixed with an iwrite_at_all in flight
 * and a blocking collective after them; the whole file checked byte for byte; a read past the
 * end; and a rank with an uncommitted buffer type, whose error reaches every rank's request.
 * The times printed show whether the starts returned before the computing rank reached its
 * wait (a measurement, not an assertion). */
#include <mpi.h>
#include "stormtest.h"
#include "io_common.h"
#include <string.h>
#include <time.h>

#define PIECE 16     /* ints per piece in the file */
#define N 16384      /* ints per rank per region */
#define REGIONS 6
#define INFLIGHT 4   /* regions written with iwrite_at_all at once */

static int value(int rank, int region, int i) { return rank * 1000003 + region * 7919 + i; }

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void fill(int *buf, int rank, int region)
{
    for (int i = 0; i < N; i++)
        buf[i] = value(rank, region, i);
}

static int check_region(const int *buf, int rank, int region)
{
    for (int i = 0; i < N; i++)
        if (buf[i] != value(rank, region, i)) {
            fprintf(stderr, "region %d of rank %d: int %d is %d, not %d\n", region, rank, i, buf[i],
                    value(rank, region, i));
            return 0;
        }
    return 1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("io_nbcoll");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char path[256];
    io_path(path, sizeof path, "io_nbcoll");
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "romio_cb_write", "enable");
    MPI_Info_set(info, "romio_cb_read", "enable");
    MPI_Info_set(info, "cb_nodes", "2");
    MPI_Info_set(info, "cb_buffer_size", "65536");
    MPI_File fh;
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    MPI_Info_free(&info);

    /* Each rank's stream: pieces of PIECE ints, the ranks' pieces one after another. */
    MPI_Datatype piece, tile;
    MPI_Type_contiguous(PIECE, MPI_INT, &piece);
    MPI_Type_create_resized(piece, 0, (MPI_Aint)PIECE * size * sizeof(int), &tile);
    MPI_Type_commit(&tile);
    CHECK_MPI(MPI_File_set_view(fh, (MPI_Offset)rank * PIECE * sizeof(int), MPI_INT, tile, "native",
                                MPI_INFO_NULL));

    int *buf[REGIONS], *back[REGIONS];
    for (int k = 0; k < REGIONS; k++) {
        buf[k] = test_malloc(N * sizeof(int));
        back[k] = test_malloc(N * sizeof(int));
        fill(buf[k], rank, k);
        memset(back[k], 0xff, N * sizeof(int));
    }

    /* 1. INFLIGHT writes in flight; the last rank computes before it waits. */
    MPI_Request req[INFLIGHT];
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    for (int k = 0; k < INFLIGHT; k++)
        CHECK_MPI(MPI_File_iwrite_at_all(fh, (MPI_Offset)k * N, buf[k], N, MPI_INT, &req[k]));
    double started = now() - t0;
    double reached = started;
    if (rank == size - 1) {
        volatile double x = 0;
        while (now() - t0 < 0.5)
            for (int i = 0; i < 1000; i++)
                x += i * 0.5;
        reached = now() - t0;
    }
    MPI_Status st[INFLIGHT];
    CHECK_MPI(MPI_Waitall(INFLIGHT, req, st));
    double done = now() - t0;
    for (int k = 0; k < INFLIGHT; k++) {
        int cnt;
        MPI_Get_count(&st[k], MPI_INT, &cnt);
        CHECK(cnt == N, "iwrite_at_all %d moved %d ints", k, cnt);
    }
    double starts_max, reached_max, done_max;
    MPI_Reduce(&started, &starts_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&reached, &reached_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&done, &done_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("io_nbcoll: %d iwrite_at_all starts returned by %.1f ms at every rank; rank %d "
               "computed until %.1f ms; all waits done at %.1f ms\n",
               INFLIGHT, starts_max * 1e3, size - 1, reached_max * 1e3, done_max * 1e3);

    /* 2. Read them back, all in flight, completed with MPI_Testany. */
    for (int k = 0; k < INFLIGHT; k++)
        CHECK_MPI(MPI_File_iread_at_all(fh, (MPI_Offset)k * N, back[k], N, MPI_INT, &req[k]));
    for (int left = INFLIGHT; left > 0;) {
        int idx, flag;
        MPI_Status s;
        CHECK_MPI(MPI_Testany(INFLIGHT, req, &idx, &flag, &s));
        if (flag && idx != MPI_UNDEFINED) {
            int cnt;
            MPI_Get_count(&s, MPI_INT, &cnt);
            CHECK(cnt == N, "iread_at_all %d moved %d ints", idx, cnt);
            left--;
        }
    }
    for (int k = 0; k < INFLIGHT; k++)
        CHECK(check_region(back[k], rank, k), "region %d read back wrong", k);

    /* 3. A split collective with the individual pointer and an iwrite_at_all in flight with it,
     * then a blocking collective read of both. */
    CHECK_MPI(MPI_File_seek(fh, (MPI_Offset)4 * N, MPI_SEEK_SET));
    CHECK_MPI(MPI_File_write_all_begin(fh, buf[4], N, MPI_INT));
    MPI_Request r5;
    CHECK_MPI(MPI_File_iwrite_at_all(fh, (MPI_Offset)5 * N, buf[5], N, MPI_INT, &r5));
    MPI_Status s4;
    CHECK_MPI(MPI_File_write_all_end(fh, buf[4], &s4));
    int cnt;
    MPI_Get_count(&s4, MPI_INT, &cnt);
    CHECK(cnt == N, "write_all_begin/end moved %d ints", cnt);
    MPI_Offset pos;
    MPI_File_get_position(fh, &pos);
    CHECK(pos == (MPI_Offset)5 * N, "the individual pointer is at %lld", (long long)pos);
    CHECK_MPI(MPI_Wait(&r5, MPI_STATUS_IGNORE));
    memset(back[4], 0, N * sizeof(int));
    memset(back[5], 0, N * sizeof(int));
    CHECK_MPI(MPI_File_seek(fh, (MPI_Offset)4 * N, MPI_SEEK_SET));
    CHECK_MPI(MPI_File_read_all_begin(fh, back[4], N, MPI_INT));
    CHECK_MPI(MPI_File_read_all_end(fh, back[4], MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_File_read_at_all(fh, (MPI_Offset)5 * N, back[5], N, MPI_INT, MPI_STATUS_IGNORE));
    CHECK(check_region(back[4], rank, 4), "region 4 read back wrong");
    CHECK(check_region(back[5], rank, 5), "region 5 read back wrong");

    /* 4. The whole file, byte for byte, as rank 0 reads it without a view. */
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    MPI_Offset fsize;
    MPI_File_get_size(fh, &fsize);
    CHECK(fsize == (MPI_Offset)REGIONS * N * size * sizeof(int), "the file has %lld bytes",
          (long long)fsize);
    if (rank == 0) {
        size_t ints = (size_t)REGIONS * N * size;
        int *all = test_malloc(ints * sizeof(int));
        CHECK_MPI(MPI_File_read_at(fh, 0, all, (int)ints, MPI_INT, MPI_STATUS_IGNORE));
        size_t bad = 0;
        for (size_t g = 0; g < ints; g++) {
            size_t b = g / ((size_t)PIECE * size), in = g % ((size_t)PIECE * size);
            int r = (int)(in / PIECE);
            size_t j = b * PIECE + in % PIECE;
            if (all[g] != value(r, (int)(j / N), (int)(j % N)))
                bad++;
        }
        CHECK(bad == 0, "%zu ints of the file are wrong", bad);
        free(all);
    }
    CHECK_MPI(MPI_File_set_view(fh, (MPI_Offset)rank * PIECE * sizeof(int), MPI_INT, tile, "native",
                                MPI_INFO_NULL));

    /* 5. A read past the end moves nothing, at every rank. */
    MPI_Request rp;
    MPI_Status sp;
    CHECK_MPI(MPI_File_iread_at_all(fh, (MPI_Offset)REGIONS * N, back[0], N, MPI_INT, &rp));
    CHECK_MPI(MPI_Wait(&rp, &sp));
    MPI_Get_count(&sp, MPI_INT, &cnt);
    CHECK(cnt == 0, "a read past the end moved %d ints", cnt);

    /* 6. Rank 1 passes an uncommitted type: its start fails, every other rank's request does. */
    MPI_Datatype raw;
    MPI_Type_contiguous(4, MPI_INT, &raw);
    MPI_Request re = MPI_REQUEST_NULL;
    int rc = MPI_File_iwrite_at_all(fh, 0, buf[0], rank == 1 ? N / 4 : N,
                                    rank == 1 ? raw : MPI_INT, &re);
    int cls = MPI_SUCCESS;
    if (rank == 1) {
        CHECK(rc != MPI_SUCCESS, "an uncommitted buffer type was accepted");
    } else {
        CHECK_MPI(rc);
        rc = MPI_Wait(&re, MPI_STATUS_IGNORE);
        CHECK(rc != MPI_SUCCESS, "rank 1's bad type did not reach rank %d's request", rank);
    }
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_TYPE, "the error class is %d, not MPI_ERR_TYPE", cls);
    MPI_Type_free(&raw);

    /* The file goes on working: region 0 written again and read back. */
    fill(buf[0], rank, 0);
    CHECK_MPI(MPI_File_iwrite_at_all(fh, 0, buf[0], N, MPI_INT, &req[0]));
    CHECK_MPI(MPI_Wait(&req[0], MPI_STATUS_IGNORE));
    memset(back[0], 0, N * sizeof(int));
    CHECK_MPI(MPI_File_iread_at_all(fh, 0, back[0], N, MPI_INT, &req[0]));
    CHECK_MPI(MPI_Wait(&req[0], MPI_STATUS_IGNORE));
    CHECK(check_region(back[0], rank, 0), "region 0 read back wrong after the error");

    CHECK_MPI(MPI_File_close(&fh));
    if (rank == 0)
        MPI_File_delete(path, MPI_INFO_NULL);
    MPI_Type_free(&tile);
    MPI_Type_free(&piece);
    for (int k = 0; k < REGIONS; k++) {
        free(buf[k]);
        free(back[k]);
    }
    return test_end();
}
