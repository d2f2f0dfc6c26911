/* MPI-IO basics: collective open/create, explicit offsets, individual pointers and seek,
 * collective and split-collective and non-blocking forms, sizes, a non-contiguous memory type,
 * info, group, amode, and delete-on-close. Each rank writes its block; blocks are read back by
 * a neighbour and checked byte by byte. */
#include <mpi.h>
#include "stormtest.h"
#include "io_common.h"

#define N 1000 /* ints per rank */

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("io_basic");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char path[256];
    io_path(path, sizeof path, "io_basic");

    MPI_File fh;
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    int amode;
    CHECK_MPI(MPI_File_get_amode(fh, &amode));
    CHECK(amode == (MPI_MODE_CREATE | MPI_MODE_RDWR), "amode %d", amode);
    MPI_Group g, wg;
    int cmp;
    CHECK_MPI(MPI_File_get_group(fh, &g));
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_compare(g, wg, &cmp);
    CHECK(cmp == MPI_IDENT, "file group differs from world's (%d)", cmp);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);

    /* 1. explicit offsets: block r at r*N ints. */
    int *buf = test_malloc(N * sizeof(int));
    for (int i = 0; i < N; i++)
        buf[i] = rank * 1000003 + i;
    MPI_Status st;
    CHECK_MPI(MPI_File_write_at(fh, (MPI_Offset)rank * N * sizeof(int), buf, N, MPI_INT, &st));
    int cnt;
    MPI_Get_count(&st, MPI_INT, &cnt);
    CHECK(cnt == N, "write_at count %d", cnt);
    CHECK_MPI(MPI_File_sync(fh));
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Offset fsize;
    CHECK_MPI(MPI_File_get_size(fh, &fsize));
    CHECK(fsize == (MPI_Offset)size * N * sizeof(int), "size %lld", (long long)fsize);

    int peer = (rank + 1) % size;
    int *in = test_malloc(N * sizeof(int));
    CHECK_MPI(MPI_File_read_at_all(fh, (MPI_Offset)peer * N * sizeof(int), in, N, MPI_INT, &st));
    MPI_Get_count(&st, MPI_INT, &cnt);
    CHECK(cnt == N, "read_at_all count %d", cnt);
    for (int i = 0; i < N; i++)
        CHECK(in[i] == peer * 1000003 + i, "peer %d int %d: %d", peer, i, in[i]);

    /* 2. individual pointer with seek, through a strided memory type (every other int). */
    MPI_Datatype every2;
    MPI_Type_vector(N / 2, 1, 2, MPI_INT, &every2);
    MPI_Type_commit(&every2);
    CHECK_MPI(MPI_File_seek(fh, (MPI_Offset)peer * N * sizeof(int), MPI_SEEK_SET));
    memset(in, 0xff, N * sizeof(int));
    CHECK_MPI(MPI_File_read(fh, in, 1, every2, &st));
    for (int i = 0; i < N / 2; i++) {
        CHECK(in[2 * i] == peer * 1000003 + i, "strided read %d: %d", i, in[2 * i]);
        CHECK(in[2 * i + 1] == -1, "strided read touched a hole at %d", 2 * i + 1);
    }
    MPI_Offset pos;
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK(pos == (MPI_Offset)peer * N * sizeof(int) + N / 2 * sizeof(int), "position %lld", (long long)pos);
    CHECK_MPI(MPI_File_seek(fh, -(MPI_Offset)(N / 2 * sizeof(int)), MPI_SEEK_CUR));
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK(pos == (MPI_Offset)peer * N * sizeof(int), "seek_cur position %lld", (long long)pos);
    CHECK_MPI(MPI_File_seek(fh, 0, MPI_SEEK_END));
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK(pos == fsize, "seek_end position %lld", (long long)pos);
    MPI_Barrier(MPI_COMM_WORLD);

    /* 3. a second region after the first, written through a strided memory type with
     * write_all at the individual pointer, read back with iread_at + Wait and the split forms. */
    MPI_Offset base = (MPI_Offset)size * N * sizeof(int);
    for (int i = 0; i < N; i++)
        buf[i] = (i % 2) ? -7 : rank * 7 + i;
    CHECK_MPI(MPI_File_seek(fh, base + (MPI_Offset)rank * (N / 2) * sizeof(int), MPI_SEEK_SET));
    CHECK_MPI(MPI_File_write_all(fh, buf, 1, every2, &st));
    MPI_Get_count(&st, MPI_INT, &cnt);
    CHECK(cnt == N / 2, "write_all count %d", cnt);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Request req;
    memset(in, 0, N * sizeof(int));
    CHECK_MPI(MPI_File_iread_at(fh, base + (MPI_Offset)peer * (N / 2) * sizeof(int), in, N / 2, MPI_INT, &req));
    CHECK_MPI(MPI_Wait(&req, &st));
    MPI_Get_count(&st, MPI_INT, &cnt);
    CHECK(cnt == N / 2, "iread_at count %d", cnt);
    for (int i = 0; i < N / 2; i++)
        CHECK(in[i] == peer * 7 + 2 * i, "region 2 int %d: %d", i, in[i]);
    memset(in, 0, N * sizeof(int));
    CHECK_MPI(MPI_File_read_at_all_begin(fh, base + (MPI_Offset)peer * (N / 2) * sizeof(int), in, N / 2, MPI_INT));
    CHECK_MPI(MPI_File_read_at_all_end(fh, in, &st));
    MPI_Get_count(&st, MPI_INT, &cnt);
    CHECK(cnt == N / 2 && in[N / 2 - 1] == peer * 7 + N - 2, "split read: count %d last %d", cnt, in[N / 2 - 1]);

    /* 4. reading past the end returns what is there. */
    MPI_Offset end = base + (MPI_Offset)size * (N / 2) * sizeof(int);
    CHECK_MPI(MPI_File_read_at(fh, end - 2 * sizeof(int), in, 10, MPI_INT, &st));
    MPI_Get_count(&st, MPI_INT, &cnt);
    CHECK(cnt == 2, "read at the end got %d ints", cnt);

    /* 5. set_size, preallocate, info. */
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_MPI(MPI_File_set_size(fh, 1000));
    CHECK_MPI(MPI_File_get_size(fh, &fsize));
    CHECK(fsize == 1000, "after set_size: %lld", (long long)fsize);
    MPI_Barrier(MPI_COMM_WORLD); /* all have looked before the file grows again */
    CHECK_MPI(MPI_File_preallocate(fh, 4096));
    CHECK_MPI(MPI_File_get_size(fh, &fsize));
    CHECK(fsize == 4096, "after preallocate: %lld", (long long)fsize);
    MPI_Info info, used;
    MPI_Info_create(&info);
    MPI_Info_set(info, "cb_buffer_size", "1048576");
    CHECK_MPI(MPI_File_set_info(fh, info));
    CHECK_MPI(MPI_File_get_info(fh, &used));
    char v[64];
    int flag;
    MPI_Info_get(used, "cb_buffer_size", sizeof v - 1, v, &flag);
    CHECK(flag && strcmp(v, "1048576") == 0, "info hint came back as %s", flag ? v : "(unset)");
    MPI_Info_free(&info);
    MPI_Info_free(&used);
    int atom;
    CHECK_MPI(MPI_File_set_atomicity(fh, 1));
    CHECK_MPI(MPI_File_get_atomicity(fh, &atom));
    CHECK(atom == 1, "atomicity %d", atom);
    CHECK_MPI(MPI_File_write_at(fh, rank * sizeof(int), &rank, 1, MPI_INT, &st));
    CHECK_MPI(MPI_File_set_atomicity(fh, 0));
    CHECK(MPI_File_c2f(fh) != 0 && MPI_File_f2c(MPI_File_c2f(fh)) == fh, "c2f/f2c do not round-trip");

    CHECK_MPI(MPI_File_close(&fh));
    CHECK(fh == MPI_FILE_NULL, "close did not null the handle");

    /* 6. delete on close: the file is gone after the close. */
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
    CHECK_MPI(MPI_File_read_at(fh, rank * sizeof(int), &cnt, 1, MPI_INT, &st));
    CHECK(cnt == rank, "atomic write read back %d", cnt);
    CHECK_MPI(MPI_File_close(&fh));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(access(path, F_OK) != 0, "%s still exists after a delete-on-close", path);

    MPI_Type_free(&every2);
    free(buf);
    free(in);
    return test_end();
}
