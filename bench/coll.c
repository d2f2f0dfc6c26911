/*
 * coll.c - collective latency, osu-style: the mean time of one call, per collective and size.
 *
 * Collectives: Barrier, Bcast, Allreduce, Reduce, Allgather, Alltoall, Gather, Scatter,
 * Reduce_scatter_block. The size is the message of one rank: the whole buffer of Bcast,
 * Allreduce and Reduce (MPI_SUM on MPI_INT/MPI_BYTE data as 4-byte ints), the block each rank
 * contributes or receives for the others (Allgather, Alltoall, Gather, Scatter,
 * Reduce_scatter_block). Sizes 8 B .. 1 MiB by factors of 8 (-m changes the largest).
 *
 * Each figure: a few warm-up calls, a calibration that picks the iteration count for about
 * TIME seconds per batch (rank 0 decides, everyone follows), then 5 batches, each started by a
 * barrier and timed at every rank; a batch's time is its slowest rank's, and the best batch is
 * reported (a descheduled rank on a shared or oversubscribed machine does not decide the
 * figure). Roots rotate over the ranks from call to call (Bcast, Reduce, Gather, Scatter).
 *
 * Output (rank 0): one line per figure, comments start with '#':
 *     coll <name> <bytes> <usec>
 * Results are spot-checked after each size.
 *
 * usage: coll [-m MAX] [-s SIZES] [-t SECONDS] [-o NAME]
 *   -m MAX      largest size in bytes (default 1048576)
 *   -s SIZES    exactly these sizes in bytes, comma-separated (e.g. 8,1048576), instead of the
 *               factors of 8 up to MAX
 *   -t SECONDS  time per batch (default 0.05)
 *   -o NAME     only this collective (e.g. Allreduce)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCHES 5

static int rank, size;
static double batch_time = 0.05;
static char *sbuf, *rbuf;

static void die(const char *msg)
{
    fprintf(stderr, "coll: rank %d: %s\n", rank, msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

enum { BARRIER, BCAST, ALLREDUCE, REDUCE, ALLGATHER, ALLTOALL, GATHER, SCATTER, REDUCE_SCATTER, NCOLL };
static const char *names[NCOLL] = {"Barrier", "Bcast",  "Allreduce", "Reduce",
                                   "Allgather", "Alltoall", "Gather", "Scatter",
                                   "Reduce_scatter_block"};

/* One call of collective c with `bytes` per rank; `it` rotates the root. */
static void call(int c, long bytes, long it)
{
    int root = (int)(it % size), n = (int)(bytes / 4);
    switch (c) {
    case BARRIER:
        MPI_Barrier(MPI_COMM_WORLD);
        break;
    case BCAST:
        MPI_Bcast(sbuf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
        break;
    case ALLREDUCE:
        MPI_Allreduce(sbuf, rbuf, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case REDUCE:
        MPI_Reduce(sbuf, rbuf, n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
        break;
    case ALLGATHER:
        MPI_Allgather(sbuf, (int)bytes, MPI_BYTE, rbuf, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
        break;
    case ALLTOALL:
        MPI_Alltoall(sbuf, (int)bytes, MPI_BYTE, rbuf, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
        break;
    case GATHER:
        MPI_Gather(sbuf, (int)bytes, MPI_BYTE, rbuf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
        break;
    case SCATTER:
        MPI_Scatter(sbuf, (int)bytes, MPI_BYTE, rbuf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
        break;
    case REDUCE_SCATTER:
        MPI_Reduce_scatter_block(sbuf, rbuf, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        break;
    }
}

/* Mean seconds per call over `iters` calls, slowest rank. */
static double timed(int c, long bytes, long iters)
{
    double t0, t, worst;
    long i;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (i = 0; i < iters; i++)
        call(c, bytes, i);
    t = (MPI_Wtime() - t0) / (double)iters;
    MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

/* The data checks: every rank's ints are rank + 1, so sums are size (size + 1) / 2. */
static void check(int c, long bytes)
{
    int n = (int)(bytes / 4), want = size * (size + 1) / 2, i;
    const int *r = (const int *)rbuf;
    switch (c) {
    case ALLREDUCE:
        if (n > 0 && (r[0] != want || r[n - 1] != want))
            die("Allreduce gave a wrong sum");
        break;
    case REDUCE_SCATTER:
        if (n > 0 && (r[0] != want || r[n - 1] != want))
            die("Reduce_scatter_block gave a wrong sum");
        break;
    case ALLTOALL:
    case ALLGATHER:
        for (i = 0; i < size && bytes >= 4; i++)
            if (((const int *)(rbuf + (long)i * bytes))[0] != i + 1)
                die("Allgather/Alltoall gave a wrong block");
        break;
    default:
        break;
    }
}

static void fill(long bytes)
{
    long i;
    for (i = 0; i < bytes * size / 4; i++)
        ((int *)sbuf)[i] = rank + 1;
}

int main(int argc, char **argv)
{
    long max = 1048576, bytes, list[32];
    const char *only = NULL;
    int c, i, nlist = 0, k;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-m") == 0 && i + 1 < argc)
            max = atol(argv[++i]);
        else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
            batch_time = atof(argv[++i]);
        else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc) {
            char *p = argv[++i];
            while (*p && nlist < 32) {
                list[nlist] = strtol(p, &p, 10);
                if (list[nlist] < 4 || list[nlist] % 4 != 0)
                    die("-s: sizes are multiples of 4 bytes");
                nlist++;
                if (*p == ',')
                    p++;
            }
            for (max = 0, k = 0; k < nlist; k++)
                max = list[k] > max ? list[k] : max;
        }
    }
    sbuf = (char *)malloc((size_t)max * (size_t)size + 64);
    rbuf = (char *)malloc((size_t)max * (size_t)size + 64);
    if (!sbuf || !rbuf)
        die("out of memory");
    memset(rbuf, 0, (size_t)max * (size_t)size);
    if (rank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len, k;
        MPI_Get_library_version(lib, &len);
        for (k = 0; lib[k]; k++)
            if (lib[k] == '\n') {
                lib[k] = 0;
                break;
            }
        printf("# library: %s\n", lib);
        printf("# collective latency (usec per call, best of %d batches of ~%.3f s), %d ranks\n", BATCHES,
               batch_time, size);
    }
    for (c = 0; c < NCOLL; c++) {
        if (only && strcmp(only, names[c]) != 0)
            continue;
        for (k = 0, bytes = nlist ? list[0] : 8; nlist ? k < nlist : bytes <= max;
             k++, bytes = nlist ? (k < nlist ? list[k] : 0) : bytes * 8) {
            long iters, b, j;
            double per, best = 1e30;
            if (c == BARRIER && k > 0)
                break;
            fill(bytes);
            for (j = 0; j < 3; j++) /* warm-up */
                call(c, bytes, j);
            per = timed(c, bytes, 3);
            iters = (long)(batch_time / (per > 1e-9 ? per : 1e-9));
            if (iters < 3)
                iters = 3;
            if (iters > 100000)
                iters = 100000;
            MPI_Bcast(&iters, 1, MPI_LONG, 0, MPI_COMM_WORLD);
            for (b = 0; b < BATCHES; b++) {
                double t = timed(c, bytes, iters);
                if (t < best)
                    best = t;
            }
            fill(bytes);
            call(c, bytes, 0);
            check(c, bytes);
            if (rank == 0) {
                printf("coll %s %ld %.3f\n", names[c], c == BARRIER ? 0 : bytes, best * 1e6);
                fflush(stdout);
            }
        }
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
