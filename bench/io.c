/* MPI-IO bandwidth: collective write and read of contiguous blocks (rank r owns bytes
 * [r*B, (r+1)*B) of the file, MPI_File_write_at_all/read_at_all) and of a strided view
 * (blocks of S bytes dealt round-robin to the ranks, a resized vector filetype, write_all/
 * read_all), and of a 3-D array of doubles block-decomposed over the ranks (subarray views,
 * write_all/read_all, the data read back checked). Prints one line per pattern: "NAME MB/s" (the whole job's bytes over the slowest
 * rank's time, best of R repetitions). Then the overlap of a non-blocking independent write
 * with computation: each rank times a blocking MPI_File_write_at of its bytes (T), then starts
 * the same as MPI_File_iwrite_at, computes for T without calling MPI and waits; "iwrite_overlap
 * P" is the share of the write's time hidden behind the computation, in percent (best of R).
 * "iwrite_all_overlap P" is the same for a collective write through collective buffering:
 * pieces of 1 KiB dealt round-robin to the ranks (romio_cb_write=enable), timed blocking with
 * MPI_File_write_all (T), then started with MPI_File_iwrite_all while each rank computes for T
 * in slices of 1 ms with an MPI_Test after each (no progress thread is assumed), then waited.
 * The share hidden depends on how long the library's blocking write takes (a slow write that
 * mostly waits has much to hide), so "iwrite_all_compute MB/s" times the same non-blocking
 * collective write beside a computation of one length for every library, C = 10 ms per MB of
 * the rank's bytes (in the same 1 ms slices with MPI_Test): the job's bytes over the slowest
 * rank's time from the start of the write to its completion after C, best of R. Its ceiling
 * is the number of ranks times 100 MB/s, reached when the write hides entirely behind C.
 *
 * usage: io DIR [-b BYTES_PER_RANK] [-s STRIDE_BLOCK] [-r REPS] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double best(double t, double b) { return (b == 0 || t < b) ? t : b; }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    long bytes = 16L << 20, block = 65536;
    int reps = 3;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-b")) bytes = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-s")) block = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-r")) reps = atoi(argv[i + 1]);
    }
    bytes = bytes / block * block;
    char path[512];
    snprintf(path, sizeof path, "%s/stormpi-bench-io-%d", dir, 0);
    if (rank == 0) {
        char p2[512];
        snprintf(p2, sizeof p2, "%s/stormpi-bench-io-%ld", dir, (long)getpid());
        strcpy(path, p2);
    }
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
    char *buf = malloc(bytes);
    for (long i = 0; i < bytes; i++)
        buf[i] = (char)(i * 7 + rank);
    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh);
    MPI_Datatype vec, ft;
    MPI_Type_vector((int)(bytes / block), (int)block, (int)(block * size), MPI_BYTE, &vec);
    MPI_Type_create_resized(vec, 0, (MPI_Aint)bytes * size, &ft);
    MPI_Type_commit(&ft);
    double tw = 0, tr = 0, sw = 0, sr = 0;
    for (int r = 0; r < reps; r++) {
        double t;
        MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        MPI_File_write_at_all(fh, (MPI_Offset)rank * bytes, buf, (int)bytes, MPI_BYTE, MPI_STATUS_IGNORE);
        t = MPI_Wtime() - t;
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        tw = best(t, tw);
        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        MPI_File_read_at_all(fh, (MPI_Offset)rank * bytes, buf, (int)bytes, MPI_BYTE, MPI_STATUS_IGNORE);
        t = MPI_Wtime() - t;
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        tr = best(t, tr);

        MPI_File_set_view(fh, (MPI_Offset)rank * block, MPI_BYTE, ft, "native", MPI_INFO_NULL);
        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        MPI_File_write_all(fh, buf, (int)bytes, MPI_BYTE, MPI_STATUS_IGNORE);
        t = MPI_Wtime() - t;
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        sw = best(t, sw);
        MPI_File_seek(fh, 0, MPI_SEEK_SET);
        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        MPI_File_read_all(fh, buf, (int)bytes, MPI_BYTE, MPI_STATUS_IGNORE);
        t = MPI_Wtime() - t;
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        sr = best(t, sr);
    }
    /* A 3-D array of doubles block-decomposed over the ranks (MPI_Dims_create), each rank's
     * block a cube of l^3 elements (l^3 <= its bytes / 8) seen through a subarray filetype: the
     * checkpoint of a structured-grid code. Written with write_all, read back with read_all into
     * another buffer and compared. */
    double bw3 = 0, br3 = 0;
    long l = 1;
    while ((l + 1) * (l + 1) * (l + 1) * 8 <= bytes)
        l++;
    {
        int dims[3] = {0, 0, 0}, gs[3], ls[3], st[3];
        MPI_Dims_create(size, 3, dims);
        int c0 = rank / (dims[1] * dims[2]), c1 = rank / dims[2] % dims[1], c2 = rank % dims[2];
        int coord[3] = {c0, c1, c2};
        for (int d = 0; d < 3; d++) {
            gs[d] = dims[d] * (int)l;
            ls[d] = (int)l;
            st[d] = coord[d] * (int)l;
        }
        MPI_Datatype sub;
        MPI_Type_create_subarray(3, gs, ls, st, MPI_ORDER_C, MPI_DOUBLE, &sub);
        MPI_Type_commit(&sub);
        int n3 = (int)(l * l * l);
        double *b3 = malloc((size_t)n3 * sizeof(double)), *r3 = malloc((size_t)n3 * sizeof(double));
        for (int i = 0; i < n3; i++)
            b3[i] = rank * 1e9 + i;
        for (int r = 0; r < reps; r++) {
            double t;
            MPI_File_set_view(fh, 0, MPI_DOUBLE, sub, "native", MPI_INFO_NULL);
            MPI_Barrier(MPI_COMM_WORLD);
            t = MPI_Wtime();
            MPI_File_write_all(fh, b3, n3, MPI_DOUBLE, MPI_STATUS_IGNORE);
            t = MPI_Wtime() - t;
            MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            bw3 = best(t, bw3);
            memset(r3, 0, (size_t)n3 * sizeof(double));
            MPI_File_seek(fh, 0, MPI_SEEK_SET);
            MPI_Barrier(MPI_COMM_WORLD);
            t = MPI_Wtime();
            MPI_File_read_all(fh, r3, n3, MPI_DOUBLE, MPI_STATUS_IGNORE);
            t = MPI_Wtime() - t;
            MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            br3 = best(t, br3);
            if (memcmp(b3, r3, (size_t)n3 * sizeof(double)) != 0) {
                fprintf(stderr, "io: rank %d read back a 3-D block that differs\n", rank);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
        free(b3);
        free(r3);
        MPI_Type_free(&sub);
    }
    /* Overlap: a write the library does at its start hides nothing (0%). */
    double overlap = -1;
    MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
    for (int r = 0; r < reps; r++) {
        MPI_Offset at = (MPI_Offset)rank * bytes;
        MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime();
        MPI_File_write_at(fh, at, buf, (int)bytes, MPI_BYTE, MPI_STATUS_IGNORE);
        double tio = MPI_Wtime() - t;
        MPI_Request req;
        volatile double x = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        MPI_File_iwrite_at(fh, at, buf, (int)bytes, MPI_BYTE, &req);
        double start = MPI_Wtime();
        while (MPI_Wtime() - start < tio)
            for (int k = 0; k < 1000; k++)
                x += k * 0.5;
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        double total = MPI_Wtime() - t;
        /* Hidden share: what the write added beyond the computation, against its own time. */
        double hidden = 100.0 * (1.0 - (total - tio) / tio);
        if (hidden < 0) hidden = 0;
        if (hidden > 100) hidden = 100;
        MPI_Allreduce(MPI_IN_PLACE, &hidden, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
        if (hidden > overlap) overlap = hidden;
    }
    /* The same for a collective write that needs collective buffering. */
    double coverlap = -1;
    MPI_Datatype piece, tile;
    const int pb = 1024;
    MPI_Type_contiguous(pb, MPI_BYTE, &piece);
    MPI_Type_create_resized(piece, 0, (MPI_Aint)pb * size, &tile);
    MPI_Type_commit(&tile);
    MPI_Info cbinfo;
    MPI_Info_create(&cbinfo);
    MPI_Info_set(cbinfo, "romio_cb_write", "enable");
    MPI_File_set_info(fh, cbinfo);
    MPI_File_set_view(fh, (MPI_Offset)rank * pb, MPI_BYTE, tile, "native", cbinfo);
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime();
        MPI_File_write_at_all(fh, 0, buf, (int)bytes, MPI_BYTE, MPI_STATUS_IGNORE);
        double tio = MPI_Wtime() - t;
        MPI_Allreduce(MPI_IN_PLACE, &tio, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        MPI_Request req;
        volatile double x = 0;
        int flag = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        MPI_File_iwrite_at_all(fh, 0, buf, (int)bytes, MPI_BYTE, &req);
        double start = MPI_Wtime();
        while (MPI_Wtime() - start < tio) {
            double slice = MPI_Wtime();
            while (MPI_Wtime() - slice < 1e-3)
                for (int k = 0; k < 100; k++)
                    x += k * 0.5;
            if (!flag)
                MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        }
        if (!flag)
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        double total = MPI_Wtime() - t;
        double hidden = 100.0 * (1.0 - (total - tio) / tio);
        if (hidden < 0) hidden = 0;
        if (hidden > 100) hidden = 100;
        MPI_Allreduce(MPI_IN_PLACE, &hidden, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
        if (hidden > coverlap) coverlap = hidden;
    }
    /* The same write beside a computation of the same length for every library. */
    double tc = 0;
    const double compute = (double)bytes / 100e6;
    for (int r = 0; r < reps; r++) {
        MPI_Request req;
        volatile double x = 0;
        int flag = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime();
        MPI_File_iwrite_at_all(fh, 0, buf, (int)bytes, MPI_BYTE, &req);
        while (MPI_Wtime() - t < compute) {
            double slice = MPI_Wtime();
            while (MPI_Wtime() - slice < 1e-3)
                for (int k = 0; k < 100; k++)
                    x += k * 0.5;
            if (!flag)
                MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        }
        if (!flag)
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        t = MPI_Wtime() - t;
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        tc = best(t, tc);
    }
    MPI_Info_free(&cbinfo);
    MPI_Type_free(&tile);
    MPI_Type_free(&piece);
    double mb = (double)bytes * size / 1e6;
    if (rank == 0) {
        printf("contig_write_all %.1f\n", mb / tw);
        printf("contig_read_all %.1f\n", mb / tr);
        printf("strided_write_all %.1f\n", mb / sw);
        printf("strided_read_all %.1f\n", mb / sr);
        printf("block3d_write_all %.1f\n", (double)l * l * l * 8 * size / 1e6 / bw3);
        printf("block3d_read_all %.1f\n", (double)l * l * l * 8 * size / 1e6 / br3);
        printf("iwrite_overlap %.1f\n", overlap);
        printf("iwrite_all_overlap %.1f\n", coverlap);
        printf("iwrite_all_compute %.1f\n", mb / tc);
    }
    MPI_File_close(&fh);
    MPI_Type_free(&vec);
    MPI_Type_free(&ft);
    free(buf);
    MPI_Finalize();
    return 0;
}
