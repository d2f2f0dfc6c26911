/*
 * striping.c - ping-pong latency and bandwidth between two ranks, per message size, in the
 * manner of NetPIPE (the measurement behind Figure 2 of Open MPI's heterogeneity paper): for
 * each size, ranks 0 and 1 bounce one message back and forth with MPI_Send / MPI_Recv; the
 * one-way time is half the round trip, and the bandwidth is the size over the one-way time.
 * Unlike a windowed bandwidth test, one message is in flight at a time, so this shows what a
 * single message gets out of the links (striped or not).
 *
 * Before the sweep, one round trip of the largest size (or -w) opens every connection the job will use
 * (all lanes of a striped message), so that small messages are measured as they are in a job that
 * has sent large ones: with every module of the stripe connected and polled.
 * Each size runs a short calibration, then BATCHES batches of round trips, each batch at least
 * TARGET seconds long (at least one round trip); the best batch is reported, so that a rank
 * being descheduled now and then does not decide the figure. Every received message is checked
 * in full after its batch (a wrong byte aborts the job).
 *
 * Output (rank 0), one line per size, comments start with '#':
 *     pp <bytes> <one-way usec> <MB/s>          (MB = 10^6 bytes)
 *
 * usage: striping [-m MAX] [-s MIN] [-b BATCHES] [-t TARGET_SECONDS] [-w WARM]
 *   -m MAX      largest size in bytes (default 8388608); sizes are MIN, 2 MIN, 4 MIN, ... MAX
 *   -s MIN      smallest size (default 1)
 *   -b BATCHES  timed batches per size (default 5)
 *   -t SECONDS  least duration of a batch (default 0.02)
 *   -w WARM     size of the warm-up round trip (default MAX)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG_PING 11
#define TAG_CTL 12

static int rank;

static void die(const char *msg)
{
    fprintf(stderr, "striping: rank %d: %s\n", rank, msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* The byte at position i of a size-byte message sent by rank r. */
static unsigned char pattern(long size, int r, long i)
{
    return (unsigned char)((i * 7 + size * 13 + r * 101 + (i >> 12)) & 0xff);
}

static void fill(unsigned char *buf, long size, int r)
{
    long i;
    for (i = 0; i < size; i++)
        buf[i] = pattern(size, r, i);
}

static void check(const unsigned char *buf, long size, int from)
{
    long i;
    for (i = 0; i < size; i++) {
        if (buf[i] != pattern(size, from, i)) {
            char msg[160];
            snprintf(msg, sizeof msg, "%ld-byte message from rank %d: byte %ld is %u, expected %u",
                     size, from, i, buf[i], pattern(size, from, i));
            die(msg);
        }
    }
}

/* n round trips of a size-byte message; returns the elapsed time on this rank. */
static double round_trips(long n, long size, unsigned char *sbuf, unsigned char *rbuf)
{
    long i;
    double t0 = MPI_Wtime();
    for (i = 0; i < n; i++) {
        if (rank == 0) {
            MPI_Send(sbuf, (int)size, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD);
            MPI_Recv(rbuf, (int)size, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(rbuf, (int)size, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, (int)size, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - t0;
}

/* Rank 0 decides, rank 1 follows: the round trips of the next batch (0 ends the size). */
static long agree(long n)
{
    if (rank == 0)
        MPI_Send(&n, 1, MPI_LONG, 1, TAG_CTL, MPI_COMM_WORLD);
    else
        MPI_Recv(&n, 1, MPI_LONG, 0, TAG_CTL, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return n;
}

int main(int argc, char **argv)
{
    int nprocs, a, batches = 5;
    long max = 8L << 20, min = 1, warm = -1, size;
    double target = 0.02;
    unsigned char *sbuf, *rbuf;
    char version[MPI_MAX_LIBRARY_VERSION_STRING + 1] = "";
    int len = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    for (a = 1; a < argc; a++) {
        if (strcmp(argv[a], "-m") == 0 && a + 1 < argc)
            max = atol(argv[++a]);
        else if (strcmp(argv[a], "-s") == 0 && a + 1 < argc)
            min = atol(argv[++a]);
        else if (strcmp(argv[a], "-b") == 0 && a + 1 < argc)
            batches = atoi(argv[++a]);
        else if (strcmp(argv[a], "-t") == 0 && a + 1 < argc)
            target = atof(argv[++a]);
        else if (strcmp(argv[a], "-w") == 0 && a + 1 < argc)
            warm = atol(argv[++a]);
        else
            die("usage: striping [-m MAX] [-s MIN] [-b BATCHES] [-t TARGET_SECONDS] [-w WARM]");
    }
    if (nprocs != 2)
        die("needs exactly 2 ranks");
    if (warm < 0)
        warm = max;
    if (max < 1 || max > (1L << 30) || min < 1 || min > max || batches < 1 || target <= 0.0 ||
        warm > (1L << 30))
        die("bad -m, -s, -b, -t or -w value");

    sbuf = malloc((size_t)(warm > max ? warm : max));
    rbuf = malloc((size_t)(warm > max ? warm : max));
    if (!sbuf || !rbuf)
        die("out of memory");

    MPI_Get_library_version(version, &len);
    version[strcspn(version, "\n")] = '\0';
    if (rank == 0) {
        printf("# striping: ping-pong, sizes %ld..%ld bytes, best of %d batches of >= %g s\n", min,
               max, batches, target);
        printf("# library: %s\n", version);
        printf("# pp <bytes> <one-way usec> <MB/s>\n");
        fflush(stdout);
    }
    /* Warm-up: a round trip of the largest size, so every lane is connected. It starts at rank
     * 0 (no barrier before it), so each link gets one connection, opened by rank 0, rather than
     * one from each side at the same moment, which the tcp BTL then has to merge. */
    fill(sbuf, warm, rank);
    round_trips(1, warm, sbuf, rbuf);
    check(rbuf, warm, 1 - rank);
    for (size = min; size <= max; size *= 2) {
        double best = 1e30, t;
        long n = 1, b;
        fill(sbuf, size, rank);
        memset(rbuf, 0, (size_t)size);
        MPI_Barrier(MPI_COMM_WORLD);
        /* Warm-up and calibration: double n until a batch takes a tenth of the target. */
        for (;;) {
            n = agree(n);
            t = round_trips(n, size, sbuf, rbuf);
            if (rank == 0)
                n = (t >= target / 10.0 || n >= (1L << 24)) ? -n : 2 * n;
            n = agree(n);
            if (n < 0)
                break;
        }
        check(rbuf, size, 1 - rank);
        /* Round trips per batch: enough for the target from the last calibration step. */
        if (rank == 0) {
            long per = -n;
            double each = t / (double)per;
            n = (long)(target / each) + 1;
        }
        for (b = 0; b < batches; b++) {
            n = agree(n);
            memset(rbuf, 0, (size_t)size);
            t = round_trips(n, size, sbuf, rbuf);
            check(rbuf, size, 1 - rank);
            if (t / (double)n < best)
                best = t / (double)n;
        }
        if (rank == 0) {
            double oneway = best / 2.0;
            printf("pp %ld %.3f %.3f\n", size, oneway * 1e6, (double)size / oneway / 1e6);
            fflush(stdout);
        }
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
