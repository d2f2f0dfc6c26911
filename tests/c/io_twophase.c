/* Two-phase collective buffering: interleaved strided views (rank k owns every size-th block,
 * blocks of odd sizes so windows cut through them) written collectively and read back, with
 * collective buffering enabled, disabled and automatic, a tiny cb_buffer_size (many rounds),
 * cb_nodes 1, 2 and all, and a striping_unit; the file's bytes are checked through the plain
 * byte view after each write. A view with holes (each rank writes half of its blocks) checks
 * that the gaps keep the file's old bytes (read-modify-write). MPI_File_get_info reports the
 * values in force. */
#include <mpi.h>
#include "stormtest.h"
#include "io_common.h"

#define BLK 13  /* ints per block */
#define NB 40   /* blocks per rank */

static int val(int gen, long i) { return gen * 10000000 + (int)i; }

static void info_check(MPI_File fh, const char *key, const char *want)
{
    MPI_Info used;
    CHECK_MPI(MPI_File_get_info(fh, &used));
    char v[MPI_MAX_INFO_VAL + 1];
    int flag = 0;
    MPI_Info_get(used, key, MPI_MAX_INFO_VAL, v, &flag);
    CHECK(flag && strcmp(v, want) == 0, "get_info %s: %s (flag %d), expected %s", key, flag ? v : "", flag, want);
    MPI_Info_free(&used);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("io_twophase");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char path[256];
    io_path(path, sizeof path, "io_twophase");
    const long total = (long)BLK * NB * size; /* ints in the file */

    /* Rank k's filetype: one block of BLK ints, then the other ranks' blocks. */
    MPI_Datatype blk, ft;
    MPI_Type_contiguous(BLK, MPI_INT, &blk);
    MPI_Type_create_resized(blk, 0, (MPI_Aint)BLK * 4 * size, &ft);
    MPI_Type_commit(&ft);
    MPI_Type_free(&blk);
    /* Half the blocks: a filetype of one block in every 2*size (holes for the others). */
    MPI_Datatype half;
    MPI_Type_contiguous(BLK, MPI_INT, &blk);
    MPI_Type_create_resized(blk, 0, (MPI_Aint)BLK * 4 * size * 2, &half);
    MPI_Type_commit(&half);
    MPI_Type_free(&blk);

    int *mine = test_malloc(sizeof(int) * BLK * NB);
    int *back = test_malloc(sizeof(int) * BLK * NB);
    int *all = test_malloc(sizeof(int) * total);

    const char *modes[] = {"enable", "disable", "automatic"};
    const char *bufs[] = {"16777216", "100", "4096"};
    char nodes[3][16];
    snprintf(nodes[0], 16, "1");
    snprintf(nodes[1], 16, "%d", size > 1 ? 2 : 1);
    snprintf(nodes[2], 16, "%d", size);
    int gen = 0;
    for (int m = 0; m < 3; m++)
        for (int b = 0; b < 3; b++)
            for (int n = 0; n < 3; n++) {
                gen++;
                MPI_Info info;
                MPI_Info_create(&info);
                MPI_Info_set(info, "romio_cb_write", modes[m]);
                MPI_Info_set(info, "romio_cb_read", modes[(m + 1) % 3]);
                MPI_Info_set(info, "cb_buffer_size", bufs[b]);
                MPI_Info_set(info, "cb_nodes", nodes[n]);
                MPI_Info_set(info, "striping_unit", b == 2 ? "64" : "1000");
                MPI_File fh;
                CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
                MPI_Info_free(&info);
                if (gen == 1) {
                    info_check(fh, "romio_cb_write", "enable");
                    info_check(fh, "romio_cb_read", "disable");
                    info_check(fh, "cb_buffer_size", "16777216");
                    info_check(fh, "cb_nodes", "1");
                    info_check(fh, "striping_unit", "1000");
                }
                CHECK_MPI(MPI_File_set_view(fh, (MPI_Offset)rank * BLK * 4, MPI_INT, ft, "native", MPI_INFO_NULL));
                for (long i = 0; i < (long)BLK * NB; i++)
                    mine[i] = val(gen, (i / BLK) * BLK * size + rank * BLK + i % BLK);
                MPI_Status st;
                if (gen % 2)
                    CHECK_MPI(MPI_File_write_all(fh, mine, BLK * NB, MPI_INT, &st));
                else
                    CHECK_MPI(MPI_File_write_at_all(fh, 0, mine, BLK * NB, MPI_INT, &st));
                int cnt;
                MPI_Get_count(&st, MPI_INT, &cnt);
                CHECK(cnt == BLK * NB, "gen %d: write count %d", gen, cnt);
                CHECK_MPI(MPI_File_sync(fh));
                /* The bytes, read independently through the byte view at every rank. */
                MPI_File fh2;
                CHECK_MPI(MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh2));
                CHECK_MPI(MPI_File_read_at(fh2, 0, all, (int)total, MPI_INT, &st));
                CHECK_MPI(MPI_File_close(&fh2));
                for (long i = 0; i < total; i++)
                    if (all[i] != val(gen, i)) {
                        FAIL("gen %d (cb_write %s, cb_buffer_size %s, cb_nodes %s): int %ld is %d, expected %d",
                             gen, modes[m], bufs[b], nodes[n], i, all[i], val(gen, i));
                        break;
                    }
                /* Read back collectively, the view's way. */
                memset(back, 0xff, sizeof(int) * BLK * NB);
                if (gen % 2)
                    CHECK_MPI(MPI_File_read_at_all(fh, 0, back, BLK * NB, MPI_INT, &st));
                else {
                    CHECK_MPI(MPI_File_seek(fh, 0, MPI_SEEK_SET));
                    CHECK_MPI(MPI_File_read_all(fh, back, BLK * NB, MPI_INT, &st));
                }
                MPI_Get_count(&st, MPI_INT, &cnt);
                CHECK(cnt == BLK * NB, "gen %d: read count %d", gen, cnt);
                CHECK(memcmp(back, mine, sizeof(int) * BLK * NB) == 0, "gen %d: read back differs", gen);
                /* Holes: each rank rewrites every other one of its blocks; the rest stays. */
                if (m == 0) {
                    CHECK_MPI(MPI_File_set_view(fh, (MPI_Offset)rank * BLK * 4, MPI_INT, half, "native", MPI_INFO_NULL));
                    for (long i = 0; i < (long)BLK * NB / 2; i++)
                        mine[i] = -val(gen, (i / BLK) * BLK * size * 2 + rank * BLK + i % BLK) - 1;
                    CHECK_MPI(MPI_File_write_at_all(fh, 0, mine, BLK * NB / 2, MPI_INT, &st));
                    CHECK_MPI(MPI_File_sync(fh));
                    CHECK_MPI(MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh2));
                    CHECK_MPI(MPI_File_read_at(fh2, 0, all, (int)total, MPI_INT, &st));
                    CHECK_MPI(MPI_File_close(&fh2));
                    for (long i = 0; i < total; i++) {
                        long blkno = i / BLK / size; /* the row of blocks */
                        int want = blkno % 2 == 0 ? -val(gen, i) - 1 : val(gen, i);
                        if (all[i] != want) {
                            FAIL("gen %d holes: int %ld is %d, expected %d", gen, i, all[i], want);
                            break;
                        }
                    }
                }
                /* A short read past the end: 3 more blocks than the file has. */
                CHECK_MPI(MPI_File_set_view(fh, (MPI_Offset)rank * BLK * 4, MPI_INT, ft, "native", MPI_INFO_NULL));
                int *big = test_malloc(sizeof(int) * BLK * (NB + 3));
                CHECK_MPI(MPI_File_read_at_all(fh, 0, big, BLK * (NB + 3), MPI_INT, &st));
                MPI_Get_count(&st, MPI_INT, &cnt);
                CHECK(cnt == BLK * NB, "gen %d: read past the end got %d ints, expected %d", gen, cnt, BLK * NB);
                free(big);
                CHECK_MPI(MPI_File_close(&fh));
                MPI_Barrier(MPI_COMM_WORLD);
            }
    free(mine);
    free(back);
    free(all);
    MPI_Type_free(&ft);
    MPI_Type_free(&half);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        MPI_File_delete(path, MPI_INFO_NULL);
    return test_end();
}
