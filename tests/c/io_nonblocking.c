/* Non-blocking independent MPI-IO that moves its bytes in the background: many accesses in
 * flight at once (more than the 64 the library keeps in flight, so some complete at their
 * start), explicit offsets, the individual pointer (advanced at the start), the shared pointer,
 * a strided memory type (packed at the start), a read that meets the end of the file, a
 * request freed before it completes and then the file closed, atomic mode, and a large write
 * polled with MPI_Test. Every byte is read back and checked. */
#include <mpi.h>
#include "stormtest.h"
#include "io_common.h"
#include <string.h>

#define BLOCK 1024   /* ints per block */
#define BLOCKS 200   /* blocks per rank */
#define BIG (8 << 20) /* ints of the large write (32 MiB) */

static int value(int rank, int block, int i) { return rank * 7919 + block * 131 + i; }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("io_nonblocking");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char path[256];
    io_path(path, sizeof path, "io_nonblocking");
    MPI_File fh;
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));

    /* 1. BLOCKS explicit-offset writes in flight, the ranks' blocks interleaved in the file. */
    int *data = test_malloc((size_t)BLOCKS * BLOCK * sizeof(int));
    MPI_Request *req = test_malloc(BLOCKS * sizeof(MPI_Request));
    for (int b = 0; b < BLOCKS; b++) {
        for (int i = 0; i < BLOCK; i++)
            data[b * BLOCK + i] = value(rank, b, i);
        MPI_Offset at = ((MPI_Offset)b * size + rank) * BLOCK * sizeof(int);
        CHECK_MPI(MPI_File_iwrite_at(fh, at, data + b * BLOCK, BLOCK, MPI_INT, &req[b]));
    }
    MPI_Status *sts = test_malloc(BLOCKS * sizeof(MPI_Status));
    CHECK_MPI(MPI_Waitall(BLOCKS, req, sts));
    for (int b = 0; b < BLOCKS; b++) {
        int cnt;
        MPI_Get_count(&sts[b], MPI_INT, &cnt);
        CHECK(cnt == BLOCK, "write %d moved %d ints", b, cnt);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* Read the neighbour's blocks back, all in flight, into one buffer. */
    int peer = (rank + 1) % size;
    int *back = test_malloc((size_t)BLOCKS * BLOCK * sizeof(int));
    memset(back, 0, (size_t)BLOCKS * BLOCK * sizeof(int));
    for (int b = 0; b < BLOCKS; b++) {
        MPI_Offset at = ((MPI_Offset)b * size + peer) * BLOCK * sizeof(int);
        CHECK_MPI(MPI_File_iread_at(fh, at, back + b * BLOCK, BLOCK, MPI_INT, &req[b]));
    }
    /* Complete them by polling, as a computing program does. */
    int all = 0;
    while (!all)
        CHECK_MPI(MPI_Testall(BLOCKS, req, &all, MPI_STATUSES_IGNORE));
    for (int b = 0; b < BLOCKS; b++)
        for (int i = 0; i < BLOCK; i++)
            CHECK(back[b * BLOCK + i] == value(peer, b, i), "block %d int %d: %d", b, i,
                  back[b * BLOCK + i]);
    MPI_Barrier(MPI_COMM_WORLD);

    /* 2. The individual pointer, under a view giving each rank its own region: advanced at the
     * start of each access. A strided memory type (every other int) is packed at the start. */
    MPI_Offset region = (MPI_Offset)BLOCKS * size * BLOCK * sizeof(int) + (MPI_Offset)rank * 4 * BLOCK * sizeof(int);
    CHECK_MPI(MPI_File_set_view(fh, region, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
    MPI_Datatype every_other;
    MPI_Type_vector(BLOCK, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    int *strided = test_malloc(2 * BLOCK * sizeof(int));
    for (int i = 0; i < 2 * BLOCK; i++)
        strided[i] = (i % 2 == 0) ? value(rank, 1000, i / 2) : -1;
    MPI_Request two[2];
    CHECK_MPI(MPI_File_iwrite(fh, strided, 1, every_other, &two[0]));
    MPI_Offset pos;
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK(pos == BLOCK, "pointer after the strided iwrite: %lld", (long long)pos);
    /* The second goes from a contiguous buffer, read where it is. */
    CHECK_MPI(MPI_File_iwrite(fh, data, BLOCK, MPI_INT, &two[1]));
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK(pos == 2 * BLOCK, "pointer after two iwrites: %lld", (long long)pos);
    CHECK_MPI(MPI_Waitall(2, two, MPI_STATUSES_IGNORE));
    int *chk = test_malloc(2 * BLOCK * sizeof(int));
    MPI_Status st;
    CHECK_MPI(MPI_File_read_at(fh, 0, chk, 2 * BLOCK, MPI_INT, &st));
    for (int i = 0; i < BLOCK; i++) {
        CHECK(chk[i] == value(rank, 1000, i), "strided int %d: %d", i, chk[i]);
        CHECK(chk[BLOCK + i] == value(rank, 0, i), "second int %d: %d", i, chk[BLOCK + i]);
    }
    MPI_Type_free(&every_other);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));

    /* 3. A read that meets the end of the file moves what there is. */
    MPI_Offset fsize;
    CHECK_MPI(MPI_File_get_size(fh, &fsize));
    MPI_Request r;
    CHECK_MPI(MPI_File_iread_at(fh, fsize - 100, chk, 400, MPI_BYTE, &r));
    CHECK_MPI(MPI_Wait(&r, &st));
    int cnt;
    MPI_Get_count(&st, MPI_BYTE, &cnt);
    CHECK(cnt == 100, "read at the end moved %d bytes, not 100", cnt);
    MPI_Barrier(MPI_COMM_WORLD);

    /* 4. Shared pointer: each rank appends 10 records; every record is found once. */
    MPI_File sh;
    char spath[300];
    snprintf(spath, sizeof spath, "%s.shared", path);
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, spath, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                            MPI_INFO_NULL, &sh));
    int rec[10][4];
    MPI_Request rr[10];
    for (int k = 0; k < 10; k++) {
        for (int i = 0; i < 4; i++)
            rec[k][i] = rank * 100 + k;
        CHECK_MPI(MPI_File_iwrite_shared(sh, rec[k], 4, MPI_INT, &rr[k]));
    }
    CHECK_MPI(MPI_Waitall(10, rr, MPI_STATUSES_IGNORE));
    MPI_Barrier(MPI_COMM_WORLD);
    int *recs = test_malloc((size_t)size * 10 * 4 * sizeof(int));
    CHECK_MPI(MPI_File_read_at(sh, 0, recs, size * 40, MPI_INT, &st));
    int seen = 0;
    for (int k = 0; k < size * 10; k++) {
        for (int i = 1; i < 4; i++)
            CHECK(recs[k * 4 + i] == recs[k * 4], "record %d torn", k);
        if (recs[k * 4] / 100 == rank)
            seen++;
    }
    CHECK(seen == 10, "found %d of this rank's 10 records", seen);
    CHECK_MPI(MPI_File_close(&sh));

    /* 5. A large write polled with MPI_Test while the program "computes". */
    int *big = test_malloc((size_t)BIG * sizeof(int));
    for (int i = 0; i < BIG; i++)
        big[i] = i ^ rank;
    char bpath[300];
    snprintf(bpath, sizeof bpath, "%s.big%d", path, rank);
    MPI_File bf;
    CHECK_MPI(MPI_File_open(MPI_COMM_SELF, bpath, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                            MPI_INFO_NULL, &bf));
    CHECK_MPI(MPI_File_iwrite_at(bf, 0, big, BIG, MPI_INT, &r));
    int flag = 0;
    long polls = 0;
    while (!flag) {
        CHECK_MPI(MPI_Test(&r, &flag, &st));
        polls++;
    }
    MPI_Get_count(&st, MPI_INT, &cnt);
    CHECK(cnt == BIG, "large write moved %d ints", cnt);
    if (rank == 0)
        printf("large write: %ld MPI_Test calls before it completed\n", polls);
    memset(big, 0, (size_t)BIG * sizeof(int));
    CHECK_MPI(MPI_File_iread_at(bf, 0, big, BIG, MPI_INT, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < BIG; i += 4099)
        CHECK(big[i] == (i ^ rank), "large read int %d: %d", i, big[i]);

    /* 6. A request freed before it completes, then the file closed: the bytes are there. */
    for (int i = 0; i < BIG; i++)
        big[i] = ~i;
    CHECK_MPI(MPI_File_iwrite_at(bf, 0, big, BIG, MPI_INT, &r));
    CHECK_MPI(MPI_Request_free(&r));
    CHECK(r == MPI_REQUEST_NULL, "freed request not MPI_REQUEST_NULL");
    CHECK_MPI(MPI_File_close(&bf));
    /* DELETE_ON_CLOSE removed it: write again without it, free, close, and check. */
    CHECK_MPI(MPI_File_open(MPI_COMM_SELF, bpath, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &bf));
    CHECK_MPI(MPI_File_iwrite_at(bf, 0, big, BIG, MPI_INT, &r));
    CHECK_MPI(MPI_Request_free(&r));
    CHECK_MPI(MPI_File_close(&bf));
    CHECK_MPI(MPI_File_open(MPI_COMM_SELF, bpath, MPI_MODE_RDONLY | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &bf));
    memset(big, 0, (size_t)BIG * sizeof(int));
    CHECK_MPI(MPI_File_read_at(bf, 0, big, BIG, MPI_INT, &st));
    for (int i = 0; i < BIG; i += 4099)
        CHECK(big[i] == ~i, "freed write int %d: %d", i, big[i]);
    CHECK_MPI(MPI_File_close(&bf));

    /* 7. Atomic mode: the accesses complete at their start, still correct. */
    CHECK_MPI(MPI_File_set_atomicity(fh, 1));
    CHECK_MPI(MPI_File_iwrite_at(fh, (MPI_Offset)rank * sizeof(int), &rank, 1, MPI_INT, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    MPI_Barrier(MPI_COMM_WORLD);
    int got = -1;
    CHECK_MPI(MPI_File_iread_at(fh, (MPI_Offset)peer * sizeof(int), &got, 1, MPI_INT, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(got == peer, "atomic read %d, not %d", got, peer);
    CHECK_MPI(MPI_File_set_atomicity(fh, 0));

    /* 8. Collective forms. Each rank's own contiguous range: */
    MPI_Offset cbase = fsize + 4096;
    CHECK_MPI(MPI_File_iwrite_at_all(fh, cbase + (MPI_Offset)rank * BLOCKS * BLOCK * sizeof(int), data,
                                     BLOCKS * BLOCK, MPI_INT, &r));
    CHECK_MPI(MPI_Wait(&r, &st));
    MPI_Get_count(&st, MPI_INT, &cnt);
    CHECK(cnt == BLOCKS * BLOCK, "iwrite_at_all moved %d ints", cnt);
    MPI_Barrier(MPI_COMM_WORLD);
    memset(back, 0, (size_t)BLOCKS * BLOCK * sizeof(int));
    CHECK_MPI(MPI_File_iread_at_all(fh, cbase + (MPI_Offset)peer * BLOCKS * BLOCK * sizeof(int), back,
                                    BLOCKS * BLOCK, MPI_INT, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int b = 0; b < BLOCKS; b++)
        for (int i = 0; i < BLOCK; i += 7)
            CHECK(back[b * BLOCK + i] == data[b * BLOCK + i] - rank * 7919 + peer * 7919,
                  "iread_at_all block %d int %d: %d", b, i, back[b * BLOCK + i]);
    /* Interleaved single ints dealt round-robin (collective buffering), through the pointer. */
    MPI_Datatype vec, dealt;
    MPI_Type_vector(BLOCK, 1, size, MPI_INT, &vec);
    MPI_Type_create_resized(vec, 0, (MPI_Aint)BLOCK * size * sizeof(int), &dealt);
    MPI_Type_commit(&dealt);
    MPI_Offset dbase = cbase + (MPI_Offset)size * BLOCKS * BLOCK * sizeof(int);
    CHECK_MPI(MPI_File_set_view(fh, dbase + rank * (MPI_Offset)sizeof(int), MPI_INT, dealt, "native", MPI_INFO_NULL));
    CHECK_MPI(MPI_File_iwrite_all(fh, data, BLOCK, MPI_INT, &r));
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK(pos == BLOCK, "pointer after iwrite_all: %lld", (long long)pos);
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    CHECK_MPI(MPI_File_read_at(fh, dbase, back, BLOCK * size, MPI_INT, &st));
    for (int i = 0; i < BLOCK * size; i++)
        CHECK(back[i] == value(i % size, 0, i / size), "dealt int %d: %d", i, back[i]);
    MPI_Type_free(&vec);
    MPI_Type_free(&dealt);

    CHECK_MPI(MPI_File_close(&fh));
    if (rank == 0)
        MPI_File_delete(path, MPI_INFO_NULL);
    free(data);
    free(back);
    free(req);
    free(sts);
    free(strided);
    free(chk);
    free(recs);
    free(big);
    return test_end();
}
