/* Shared file pointers: write_shared under contention (every record lands once, none
 * overlap), write_ordered (records in rank order after them), read_ordered and read_shared
 * back, seek_shared/get_position_shared, and the non-blocking iwrite_shared. */
#include <mpi.h>
#include "stormtest.h"
#include "io_common.h"

#define REC 16 /* ints per record */
#define ROUNDS 20

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("io_shared");
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char path[256];
    io_path(path, sizeof path, "io_shared");
    MPI_File fh;
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));

    /* 1. contention: ROUNDS records per rank through the shared pointer. */
    int rec[REC];
    MPI_Status st;
    for (int k = 0; k < ROUNDS; k++) {
        for (int i = 0; i < REC; i++)
            rec[i] = rank * 1000 + k;
        if (k % 2)
            CHECK_MPI(MPI_File_write_shared(fh, rec, REC, MPI_INT, &st));
        else {
            MPI_Request r;
            CHECK_MPI(MPI_File_iwrite_shared(fh, rec, REC, MPI_INT, &r));
            CHECK_MPI(MPI_Wait(&r, &st));
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Offset sp;
    CHECK_MPI(MPI_File_get_position_shared(fh, &sp));
    CHECK(sp == (MPI_Offset)size * ROUNDS * REC, "shared position %lld", (long long)sp);

    /* 2. ordered: one record per rank, in rank order. */
    for (int i = 0; i < REC; i++)
        rec[i] = 77000 + rank;
    CHECK_MPI(MPI_File_write_ordered(fh, rec, REC, MPI_INT, &st));
    MPI_Barrier(MPI_COMM_WORLD); /* everyone's records are in before rank 0 reads them */
    CHECK_MPI(MPI_File_get_position_shared(fh, &sp));
    CHECK(sp == (MPI_Offset)size * (ROUNDS + 1) * REC, "shared position after ordered %lld", (long long)sp);

    /* Check: every record whole, each (rank, round) once, then the ordered ones in order. */
    int total = size * (ROUNDS + 1) * REC;
    int *all = test_malloc((size_t)total * sizeof(int));
    CHECK_MPI(MPI_File_read_at(fh, 0, all, total, MPI_INT, &st));
    char *seen = calloc((size_t)size * ROUNDS, 1);
    for (int r = 0; r < size * ROUNDS; r++) {
        int v = all[r * REC];
        for (int i = 1; i < REC; i++)
            CHECK(all[r * REC + i] == v, "record %d is torn (%d vs %d)", r, all[r * REC + i], v);
        int who = v / 1000, k = v % 1000;
        CHECK(who >= 0 && who < size && k < ROUNDS && !seen[who * ROUNDS + k], "record %d: bad or repeated value %d", r, v);
        seen[who * ROUNDS + k] = 1;
    }
    for (int q = 0; q < size; q++)
        CHECK(all[(size * ROUNDS + q) * REC] == 77000 + q, "ordered record %d is %d", q, all[(size * ROUNDS + q) * REC]);

    /* 3. seek_shared back to the ordered records; read_ordered gives each rank its own. */
    CHECK_MPI(MPI_File_seek_shared(fh, (MPI_Offset)size * ROUNDS * REC, MPI_SEEK_SET));
    memset(rec, 0, sizeof rec);
    CHECK_MPI(MPI_File_read_ordered(fh, rec, REC, MPI_INT, &st));
    CHECK(rec[0] == 77000 + rank && rec[REC - 1] == 77000 + rank, "read_ordered got %d", rec[0]);

    /* 4. read_shared from the start: together the ranks read the first size records once. */
    CHECK_MPI(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    CHECK_MPI(MPI_File_read_shared(fh, rec, REC, MPI_INT, &st));
    int cnt;
    MPI_Get_count(&st, MPI_INT, &cnt);
    CHECK(cnt == REC, "read_shared count %d", cnt);
    int first = rec[0], sum = 0;
    MPI_Allreduce(&first, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    int want = 0;
    for (int r = 0; r < size; r++)
        want += all[r * REC];
    CHECK(sum == want, "read_shared records sum %d, want %d", sum, want);

    CHECK_MPI(MPI_File_close(&fh));
    free(all);
    free(seen);
    return test_end();
}
