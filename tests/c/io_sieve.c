/* Write sieving: every rank writes its interleaved small blocks (rank k every size-th block of
 * 3 ints) independently and at the same time, many times over; each write's window spans the
 * other ranks' blocks, read and written back under a byte-range lock, so no rank's bytes may be
 * lost. Windows of the default size, of ind_wr_buffer_size 100 (many windows), in atomic mode,
 * and on a file opened write-only (no sieving); the file is checked after each. */
#include <mpi.h>
#include "stormtest.h"
#include "io_common.h"

#define BLK 3
#define NB 500
#define REPS 6

static int val(int gen, int rep, long i) { return gen * 100000000 + rep * 1000000 + (int)i; }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("io_sieve");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char path[256];
    io_path(path, sizeof path, "io_sieve");
    const long total = (long)BLK * NB * size;
    MPI_Datatype blk, ft;
    MPI_Type_contiguous(BLK, MPI_INT, &blk);
    MPI_Type_create_resized(blk, 0, (MPI_Aint)BLK * 4 * size, &ft);
    MPI_Type_commit(&ft);
    MPI_Type_free(&blk);
    int *mine = test_malloc(sizeof(int) * BLK * NB);
    int *all = test_malloc(sizeof(int) * total);
    for (int gen = 0; gen < 4; gen++) {
        MPI_Info info;
        MPI_Info_create(&info);
        if (gen == 1)
            MPI_Info_set(info, "ind_wr_buffer_size", "100");
        int amode = gen == 3 ? MPI_MODE_CREATE | MPI_MODE_WRONLY : MPI_MODE_CREATE | MPI_MODE_RDWR;
        MPI_File fh;
        CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, amode, info, &fh));
        MPI_Info_free(&info);
        if (gen == 2)
            CHECK_MPI(MPI_File_set_atomicity(fh, 1));
        CHECK_MPI(MPI_File_set_view(fh, (MPI_Offset)rank * BLK * 4, MPI_INT, ft, "native", MPI_INFO_NULL));
        for (int rep = 0; rep < REPS; rep++) {
            for (long i = 0; i < (long)BLK * NB; i++)
                mine[i] = val(gen, rep, (i / BLK) * BLK * size + rank * BLK + i % BLK);
            /* Ranks out of step: rank k writes its later half first on odd repetitions. */
            MPI_Status st;
            int h = BLK * NB / 2;
            if ((rep + rank) % 2) {
                CHECK_MPI(MPI_File_write_at(fh, h, mine + h, BLK * NB - h, MPI_INT, &st));
                CHECK_MPI(MPI_File_write_at(fh, 0, mine, h, MPI_INT, &st));
            } else {
                CHECK_MPI(MPI_File_write_at(fh, 0, mine, BLK * NB, MPI_INT, &st));
            }
            int cnt;
            MPI_Get_count(&st, MPI_INT, &cnt);
            CHECK(cnt > 0, "gen %d rep %d: count %d", gen, rep, cnt);
            CHECK_MPI(MPI_File_sync(fh));
            MPI_Barrier(MPI_COMM_WORLD);
            CHECK_MPI(MPI_File_sync(fh));
            MPI_File fh2;
            CHECK_MPI(MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh2));
            CHECK_MPI(MPI_File_read_at(fh2, 0, all, (int)total, MPI_INT, &st));
            CHECK_MPI(MPI_File_close(&fh2));
            for (long i = 0; i < total; i++)
                if (all[i] != val(gen, rep, i)) {
                    FAIL("gen %d rep %d: int %ld is %d, expected %d (written by rank %ld)", gen, rep, i,
                         all[i], val(gen, rep, i), (i / BLK) % size);
                    break;
                }
            MPI_Barrier(MPI_COMM_WORLD);
        }
        CHECK_MPI(MPI_File_close(&fh));
    }
    free(mine);
    free(all);
    MPI_Type_free(&ft);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        MPI_File_delete(path, MPI_INFO_NULL);
    return test_end();
}
