/*
 * p2p.c - point-to-point latency and bandwidth between two ranks.
 *
 * Latency: ping-pong of one message between ranks 0 and 1 with MPI_Send / MPI_Recv; sizes 0 B,
 * 1 B, 2 B, 4 B ... MAX; warm-up round trips, then timed ones (fewer for large sizes); reports the
 * one-way latency, half the mean round-trip time, in microseconds.
 * Bandwidth: rank 0 posts a window of 64 MPI_Isend, rank 1 64 MPI_Irecv (into distinct buffers),
 * both MPI_Waitall, then rank 1 returns a 4-byte acknowledgement; repeated; reports the rate in
 * MB/s (10^6 bytes per second) for sizes 1 B .. MAX.
 * The timed iterations are run in 5 equal batches and the best batch is reported, so that a
 * rank being descheduled now and then (a shared or oversubscribed machine) does not decide the
 * figure.
 *
 * Output (rank 0), one line per figure, comments start with '#':
 *     lat <bytes> <usec>
 *     bw <bytes> <MB/s>
 * After each size the last message received is spot-checked, so a broken transfer is an error,
 * not a fast result.
 *
 * usage: p2p [-l] [-b] [-m MAX] [-i SCALE]
 *   -l        latency only          -b        bandwidth only
 *   -m MAX    largest size in bytes (default 4194304)
 *   -i SCALE  multiply every iteration count by SCALE (e.g. 0.1 for a quick run, 10 for a
 *             careful one)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 64
#define BATCHES 5
#define TAG_PING 1
#define TAG_BW 2
#define TAG_ACK 3

static int rank;
static double scale = 1.0;

static void die(const char *msg)
{
    fprintf(stderr, "p2p: rank %d: %s\n", rank, msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

static long scaled(long n, long min)
{
    long v = (long)((double)n * scale);
    return v < min ? min : v;
}

static long lat_iters(long size)
{
    return scaled(size <= 8192 ? 10000 : 8192L * 1000 / size, 20);
}

static long bw_iters(long size)
{
    return scaled(size <= 8192 ? 200 : 8192L * 200 / size, 5);
}

static unsigned char fill_byte(long size) { return (unsigned char)('a' + size % 26); }

static void spot_check(const unsigned char *buf, long size, const char *what)
{
    if (size > 0 && (buf[0] != fill_byte(size) || buf[size - 1] != fill_byte(size))) {
        char msg[128];
        snprintf(msg, sizeof msg, "%s: %ld-byte message arrived with wrong content", what, size);
        die(msg);
    }
}

static void latency(long max, unsigned char *sbuf, unsigned char *rbuf)
{
    long size, i;
    if (rank == 0)
        printf("# one-way latency (usec): ping-pong with MPI_Send/MPI_Recv\n");
    for (size = 0; size <= max; size = size ? size * 2 : 1) {
        long iters = lat_iters(size), warm = iters / 10 + 1, batch = (iters + BATCHES - 1) / BATCHES;
        double t0 = 0.0, t = 1e30;
        iters = batch * BATCHES;
        memset(sbuf, fill_byte(size), (size_t)size);
        memset(rbuf, 0, (size_t)size);
        MPI_Barrier(MPI_COMM_WORLD);
        for (i = 0; i < warm + iters; i++) {
            if (i >= warm && (i - warm) % batch == 0) {
                double now = MPI_Wtime();
                if (i > warm && now - t0 < t)
                    t = now - t0;
                t0 = now;
            }
            if (rank == 0) {
                MPI_Send(sbuf, (int)size, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD);
                MPI_Recv(rbuf, (int)size, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(rbuf, (int)size, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(sbuf, (int)size, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD);
            }
        }
        if (MPI_Wtime() - t0 < t)
            t = MPI_Wtime() - t0;
        if (rank < 2)
            spot_check(rbuf, size, "latency");
        if (rank == 0) {
            printf("lat %ld %.3f\n", size, t * 1e6 / (2.0 * (double)batch));
            fflush(stdout);
        }
    }
}

static void bandwidth(long max, unsigned char *sbuf, unsigned char *rbuf)
{
    long size, i;
    int w, ack = 0;
    MPI_Request req[WINDOW];
    if (rank == 0)
        printf("# bandwidth (MB/s): windows of %d MPI_Isend/MPI_Irecv, then a 4-byte ack\n",
               WINDOW);
    for (size = 1; size <= max; size *= 2) {
        long iters = bw_iters(size), warm = iters / 10 + 1, batch = (iters + BATCHES - 1) / BATCHES;
        double t0 = 0.0, t = 1e30;
        iters = batch * BATCHES;
        memset(sbuf, fill_byte(size), (size_t)size);
        memset(rbuf, 0, (size_t)size * WINDOW);
        MPI_Barrier(MPI_COMM_WORLD);
        for (i = 0; i < warm + iters; i++) {
            if (i >= warm && (i - warm) % batch == 0) {
                double now = MPI_Wtime();
                if (i > warm && now - t0 < t)
                    t = now - t0;
                t0 = now;
            }
            if (rank == 0) {
                for (w = 0; w < WINDOW; w++)
                    MPI_Isend(sbuf, (int)size, MPI_BYTE, 1, TAG_BW, MPI_COMM_WORLD, &req[w]);
                MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
                MPI_Recv(&ack, 1, MPI_INT, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                for (w = 0; w < WINDOW; w++)
                    MPI_Irecv(rbuf + (size_t)w * (size_t)size, (int)size, MPI_BYTE, 0, TAG_BW,
                              MPI_COMM_WORLD, &req[w]);
                MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
                MPI_Send(&ack, 1, MPI_INT, 0, TAG_ACK, MPI_COMM_WORLD);
            }
        }
        if (MPI_Wtime() - t0 < t)
            t = MPI_Wtime() - t0;
        if (rank == 1) {
            spot_check(rbuf, size, "bandwidth (first of window)");
            spot_check(rbuf + (size_t)(WINDOW - 1) * (size_t)size, size, "bandwidth (last of window)");
        }
        if (rank == 0) {
            printf("bw %ld %.2f\n", size, (double)size * WINDOW * (double)batch / t / 1e6);
            fflush(stdout);
        }
    }
}

int main(int argc, char **argv)
{
    int size, a, do_lat = 1, do_bw = 1, len = 0;
    long max = 4L << 20;
    unsigned char *sbuf, *rbuf;
    char version[MPI_MAX_LIBRARY_VERSION_STRING + 1] = "";

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (a = 1; a < argc; a++) {
        if (strcmp(argv[a], "-l") == 0) {
            do_lat = 1;
            do_bw = 0;
        } else if (strcmp(argv[a], "-b") == 0) {
            do_bw = 1;
            do_lat = 0;
        } else if (strcmp(argv[a], "-m") == 0 && a + 1 < argc) {
            max = atol(argv[++a]);
        } else if (strcmp(argv[a], "-i") == 0 && a + 1 < argc) {
            scale = atof(argv[++a]);
        } else {
            die("usage: p2p [-l] [-b] [-m MAX] [-i SCALE]");
        }
    }
    if (size < 2)
        die("needs 2 ranks");
    if (max < 1 || max > (1L << 30) || scale <= 0.0)
        die("bad -m or -i value");

    sbuf = malloc((size_t)max);
    rbuf = malloc((size_t)max * WINDOW);
    if (!sbuf || !rbuf)
        die("out of memory");
    memset(sbuf, 0, (size_t)max);
    memset(rbuf, 0, (size_t)max * WINDOW);

    MPI_Get_library_version(version, &len);
    version[strcspn(version, "\n")] = '\0';
    if (rank == 0) {
        printf("# p2p: %d ranks (ranks 0 and 1 measure), max %ld bytes, iteration scale %g\n", size,
               max, scale);
        printf("# library: %s\n", version);
        fflush(stdout);
    }
    if (do_lat)
        latency(max, sbuf, rbuf);
    if (do_bw)
        bandwidth(max, sbuf, rbuf);

    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
