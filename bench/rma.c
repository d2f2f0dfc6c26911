/*
 * rma.c - one-sided communication latency and bandwidth: rank 0 is the origin, rank 1 the target.
 *
 * Prints one line per measurement, "<metric> <bytes> <usec>" (time per operation including
 * its synchronisation, best of 3 trials), for:
 *   put_fence, get_fence   MPI_Put / MPI_Get of <bytes> then MPI_Win_fence (both ranks)
 *   put_flush, get_flush   under MPI_Win_lock_all: the operation then MPI_Win_flush; the target
 *                          waits in MPI_Barrier meanwhile (passive target)
 *   acc_flush              MPI_Accumulate of <bytes>/8 doubles (MPI_SUM) then MPI_Win_flush
 *   fop, cas               MPI_Fetch_and_op (MPI_SUM, one long) and MPI_Compare_and_swap (one
 *                          long), each then MPI_Win_flush
 *   put_bw, get_bw         bandwidth, OSU-style: under MPI_Win_lock_all, streams of 64 puts (gets)
 *                          of <bytes> then one MPI_Win_flush; usec per operation, so bandwidth is
 *                          <bytes> / usec (a time ratio r between libraries is a bandwidth 1/r)
 * usage: rma [-m MAXBYTES] [-i SCALE] [--create]   (default 1 MiB; SCALE multiplies the
 *        iteration counts; --create: the window is MPI_Win_create over malloc'd memory instead
 *        of MPI_Win_allocate)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank;
static double scale = 1.0;

static long iters_for(long size)
{
    long n = size <= 4096 ? 2000 : (long)(8L * 1024 * 1024 / size);
    if (n < 20)
        n = 20;
    n = (long)(n * scale);
    return n < 5 ? 5 : n;
}

static void report(const char *what, long size, double best, long n)
{
    if (rank == 0)
        printf("%s %ld %.3f\n", what, size, best * 1e6 / (double)n);
}

enum kind { PUT, GET, ACC, FOP, CAS };

static double run_flush(enum kind k, MPI_Win win, char *buf, long size, long n)
{
    double best = 1e30;
    for (int trial = 0; trial < 3; trial++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            long one = 1, zero = 0, res;
            MPI_Win_lock_all(0, win);
            double t = MPI_Wtime();
            for (long i = 0; i < n; i++) {
                switch (k) {
                case PUT: MPI_Put(buf, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, win); break;
                case GET: MPI_Get(buf, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, win); break;
                case ACC:
                    MPI_Accumulate(buf, (int)(size / 8), MPI_DOUBLE, 1, 0, (int)(size / 8),
                                   MPI_DOUBLE, MPI_SUM, win);
                    break;
                case FOP: MPI_Fetch_and_op(&one, &res, MPI_LONG, 1, 0, MPI_SUM, win); break;
                case CAS: MPI_Compare_and_swap(&one, &zero, &res, MPI_LONG, 1, 0, win); break;
                }
                MPI_Win_flush(1, win);
            }
            t = MPI_Wtime() - t;
            MPI_Win_unlock_all(win);
            if (t < best)
                best = t;
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    return best;
}

/* Streams of BW_WINDOW operations, each stream then one flush (n a multiple of BW_WINDOW). */
enum { BW_WINDOW = 64 };

static double run_stream(enum kind k, MPI_Win win, char *buf, long size, long n)
{
    double best = 1e30;
    for (int trial = 0; trial < 3; trial++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            MPI_Win_lock_all(0, win);
            double t = MPI_Wtime();
            for (long i = 0; i < n; i += BW_WINDOW) {
                for (int j = 0; j < BW_WINDOW; j++) {
                    if (k == PUT)
                        MPI_Put(buf, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, win);
                    else
                        MPI_Get(buf, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, win);
                }
                MPI_Win_flush(1, win);
            }
            t = MPI_Wtime() - t;
            MPI_Win_unlock_all(win);
            if (t < best)
                best = t;
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    return best;
}

/* Operations for a bandwidth measurement of <size>: iters_for's, in whole streams. */
static long stream_iters(long size)
{
    long n = (iters_for(size) + BW_WINDOW - 1) / BW_WINDOW * BW_WINDOW;
    return n;
}

static double run_fence(enum kind k, MPI_Win win, char *buf, long size, long n)
{
    double best = 1e30;
    for (int trial = 0; trial < 3; trial++) {
        MPI_Win_fence(0, win);
        double t = MPI_Wtime();
        for (long i = 0; i < n; i++) {
            if (rank == 0) {
                if (k == PUT)
                    MPI_Put(buf, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, win);
                else
                    MPI_Get(buf, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, win);
            }
            MPI_Win_fence(0, win);
        }
        t = MPI_Wtime() - t;
        if (t < best)
            best = t;
    }
    return best;
}

int main(int argc, char **argv)
{
    long max = 1 << 20;
    int size, create = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc)
            max = atol(argv[++i]);
        else if (!strcmp(argv[i], "-i") && i + 1 < argc)
            scale = atof(argv[++i]);
        else if (!strcmp(argv[i], "--create"))
            create = 1;
    }
    if (size < 2) {
        fprintf(stderr, "rma: needs 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int vlen;
    MPI_Get_library_version(version, &vlen);
    char *nl = strchr(version, '\n');
    if (nl)
        *nl = 0;
    if (rank == 0)
        printf("# library: %s\n# rma: max %ld bytes, iteration scale %g, window by %s\n", version,
               max, scale, create ? "MPI_Win_create" : "MPI_Win_allocate");
    char *buf = malloc(max);
    memset(buf, 0, max);
    char *base;
    MPI_Win win;
    char *user = NULL;
    if (create) {
        user = malloc(max);
        base = user;
        MPI_Win_create(user, max, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    } else {
        MPI_Win_allocate(max, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    }
    memset(base, 0, max);
    MPI_Barrier(MPI_COMM_WORLD);

    for (long s = 8; s <= max; s *= 4)
        report("put_flush", s, run_flush(PUT, win, buf, s, iters_for(s)), iters_for(s));
    for (long s = 8; s <= max; s *= 4)
        report("get_flush", s, run_flush(GET, win, buf, s, iters_for(s)), iters_for(s));
    for (long s = 8; s <= max; s *= 4)
        report("put_fence", s, run_fence(PUT, win, buf, s, iters_for(s)), iters_for(s));
    for (long s = 8; s <= max; s *= 4)
        report("get_fence", s, run_fence(GET, win, buf, s, iters_for(s)), iters_for(s));
    for (long s = 8; s <= 65536 && s <= max; s *= 4)
        report("acc_flush", s, run_flush(ACC, win, buf, s, iters_for(s)), iters_for(s));
    for (long s = 8; s <= max; s *= 4)
        report("put_bw", s, run_stream(PUT, win, buf, s, stream_iters(s)), stream_iters(s));
    for (long s = 8; s <= max; s *= 4)
        report("get_bw", s, run_stream(GET, win, buf, s, stream_iters(s)), stream_iters(s));
    report("fop", 8, run_flush(FOP, win, buf, 8, iters_for(8)), iters_for(8));
    report("cas", 8, run_flush(CAS, win, buf, 8, iters_for(8)), iters_for(8));

    MPI_Win_free(&win);
    free(user);
    free(buf);
    MPI_Finalize();
    return 0;
}
