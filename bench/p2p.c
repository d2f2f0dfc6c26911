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
 * figure. Before the first size of each, 50 ms of 4-byte round trips bring the two ranks to a
 * steady state: on this VM the first ~10 ms of a ping-pong run ~20% slower whatever the size
 * (the same sizes measured again in the same process came out at the later sizes' speed), which
 * charged it to whichever sizes came first.
 * --hints runs both on a dup of MPI_COMM_WORLD carrying the four MPI-4 assertions
 * (mpi_assert_no_any_source, _no_any_tag, _allow_overtaking, _exact_length; all true of this
 * program), for comparing a library's matching path with and without them.
 *
 * Deep queues (-q DEPTH, instead of latency and bandwidth): the matching cost when many
 * receives or messages wait, as halo exchanges and task codes make them. 8-byte messages with
 * DEPTH distinct tags (0 .. DEPTH-1), rank 0 to rank 1:
 *   posted first: rank 1 posts the DEPTH MPI_Irecv in tag order and tells rank 0, which sends
 *   in reverse tag order (each message matches the receive posted last); rank 1 MPI_Waitall;
 *   unexpected first: rank 0 sends in tag order, then a 0-byte marker (in order behind them, so
 *   all are queued when it arrives); rank 1 receives the marker, then posts the receives in
 *   reverse tag order and MPI_Waitall.
 * Each round ends with a 4-byte acknowledgement; every payload (the tag and round) is checked.
 * Reported as messages per second, best batch.
 *
 * Output (rank 0), one line per figure, comments start with '#':
 *     lat <bytes> <usec>
 *     bw <bytes> <MB/s>
 *     qpost <depth> <msgs/s>
 *     qunex <depth> <msgs/s>
 * After each size the last message received is spot-checked, so a broken transfer is an error,
 * not a fast result.
 *
 * Multi-threaded mode (-t T): MPI_Init_thread(MPI_THREAD_MULTIPLE) instead of MPI_Init (the
 * program exits with status 3 and a message naming the level it got if the library provides
 * less); T threads on ranks 0 and 1, thread k of rank 0 paired with thread k of rank 1 on a
 * communicator of their own (dups of MPI_COMM_WORLD made before the threads start), all pairs
 * running at once:
 *   latency: the ping-pong above per pair, sizes 0 B, 1 B, 4 B ... MAX (default 4096);
 *   message rate: windows of 64 MPI_Isend/MPI_Irecv of 1, 2, 4 ... 32 bytes, then a 4-byte
 *   acknowledgement, per pair.
 * Every timed batch starts together: the threads of a rank meet at a barrier and each pair
 * exchanges a 0-byte message first.  Reported (rank 0), best of the 5 batches:
 *     tlat <T> <bytes> <usec>     one-way latency while all pairs run: the batch's window (first
 *                                 pair's start to last pair's end) / (2 x round trips per pair).
 *                                 With enough cores this is each pair's latency; when the threads
 *                                 outnumber the cores and pairs take turns it grows accordingly
 *                                 (a per-pair best batch would report a pair that had the cores
 *                                 to itself while the others waited)
 *     trate <T> <bytes> <msgs/s>  messages of all pairs in the batch / the batch's window
 * The single-threaded mode (no -t) is unchanged by this: same calls, same iteration logic.
 *
 * usage: p2p [-l] [-b] [-s MIN] [-m MAX] [-i SCALE] [-t T] [-q DEPTH] [--hints]
 *   -l        latency only          -b        bandwidth (with -t: message rate) only
 *   -s MIN    smallest size in bytes (default 0 for latency, 1 for bandwidth; not with -t):
 *             the sizes are MIN, 2 MIN, 4 MIN ... MAX
 *   -q DEPTH  the deep-queue rates at DEPTH (1 .. 65536) instead of latency and bandwidth
 *   -m MAX    largest size in bytes (default 4194304; with -t: latency sizes, default 4096)
 *   -i SCALE  multiply every iteration count by SCALE (e.g. 0.1 for a quick run, 10 for a
 *             careful one)
 *   -t T      the multi-threaded mode with T thread pairs (1 .. 64)
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* pthread_barrier_t also under -std=c99 */
#endif
#include <mpi.h>
#include <pthread.h>
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
/* The single-threaded benchmark's communicator: MPI_COMM_WORLD, or with --hints a dup of it
 * carrying the four MPI-4 assertions (mpi_assert_no_any_source, _no_any_tag,
 * _allow_overtaking, _exact_length), which a library may use for a faster matching path. */
static MPI_Comm comm;

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

/* 50 ms of 4-byte round trips between ranks 0 and 1, timed by rank 0 (see the header). */
static void settle(void)
{
    int go = 1;
    double t0;
    MPI_Barrier(comm);
    if (rank >= 2)
        return;
    t0 = MPI_Wtime();
    while (go) {
        if (rank == 0) {
            go = MPI_Wtime() - t0 < 0.05;
            MPI_Send(&go, 1, MPI_INT, 1, TAG_PING, comm);
            MPI_Recv(&go, 1, MPI_INT, 1, TAG_PING, comm, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&go, 1, MPI_INT, 0, TAG_PING, comm, MPI_STATUS_IGNORE);
            MPI_Send(&go, 1, MPI_INT, 0, TAG_PING, comm);
        }
    }
}

static void latency(long min, long max, unsigned char *sbuf, unsigned char *rbuf)
{
    long size, i;
    if (rank == 0)
        printf("# one-way latency (usec): ping-pong with MPI_Send/MPI_Recv\n");
    settle();
    for (size = min; size <= max; size = size ? size * 2 : 1) {
        long iters = lat_iters(size), warm = iters / 10 + 1, batch = (iters + BATCHES - 1) / BATCHES;
        double t0 = 0.0, t = 1e30;
        iters = batch * BATCHES;
        memset(sbuf, fill_byte(size), (size_t)size);
        memset(rbuf, 0, (size_t)size);
        MPI_Barrier(comm);
        for (i = 0; i < warm + iters; i++) {
            if (i >= warm && (i - warm) % batch == 0) {
                double now = MPI_Wtime();
                if (i > warm && now - t0 < t)
                    t = now - t0;
                t0 = now;
            }
            if (rank == 0) {
                MPI_Send(sbuf, (int)size, MPI_BYTE, 1, TAG_PING, comm);
                MPI_Recv(rbuf, (int)size, MPI_BYTE, 1, TAG_PING, comm, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(rbuf, (int)size, MPI_BYTE, 0, TAG_PING, comm, MPI_STATUS_IGNORE);
                MPI_Send(sbuf, (int)size, MPI_BYTE, 0, TAG_PING, comm);
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

static void bandwidth(long min, long max, unsigned char *sbuf, unsigned char *rbuf)
{
    long size, i;
    int w, ack = 0;
    MPI_Request req[WINDOW];
    if (rank == 0)
        printf("# bandwidth (MB/s): windows of %d MPI_Isend/MPI_Irecv, then a 4-byte ack\n",
               WINDOW);
    settle();
    for (size = min > 0 ? min : 1; size <= max; size *= 2) {
        long iters = bw_iters(size), warm = iters / 10 + 1, batch = (iters + BATCHES - 1) / BATCHES;
        double t0 = 0.0, t = 1e30;
        iters = batch * BATCHES;
        memset(sbuf, fill_byte(size), (size_t)size);
        memset(rbuf, 0, (size_t)size * WINDOW);
        MPI_Barrier(comm);
        for (i = 0; i < warm + iters; i++) {
            if (i >= warm && (i - warm) % batch == 0) {
                double now = MPI_Wtime();
                if (i > warm && now - t0 < t)
                    t = now - t0;
                t0 = now;
            }
            if (rank == 0) {
                for (w = 0; w < WINDOW; w++)
                    MPI_Isend(sbuf, (int)size, MPI_BYTE, 1, TAG_BW, comm, &req[w]);
                MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
                MPI_Recv(&ack, 1, MPI_INT, 1, TAG_ACK, comm, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                for (w = 0; w < WINDOW; w++)
                    MPI_Irecv(rbuf + (size_t)w * (size_t)size, (int)size, MPI_BYTE, 0, TAG_BW,
                              comm, &req[w]);
                MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
                MPI_Send(&ack, 1, MPI_INT, 0, TAG_ACK, comm);
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

/* ---- deep queues (-q) ---- */

#define TAG_MARK 5
#define QTAG0 16 /* the deep queue's tags: QTAG0 .. QTAG0 + DEPTH - 1 */

/* One mode of the deep-queue benchmark: posted first (unexpected = 0) or unexpected first. */
static void deep_queue(int depth, int unexpected)
{
    long iters = (long)(200000.0 / depth * scale), i, batch;
    int t, ack = 0;
    double t0 = 0.0, best = 1e30;
    long *buf = malloc((size_t)depth * sizeof(long));
    MPI_Request *req = malloc((size_t)depth * sizeof(MPI_Request));
    if (!buf || !req)
        die("out of memory");
    if (iters < BATCHES)
        iters = BATCHES;
    batch = (iters + BATCHES - 1) / BATCHES;
    iters = batch * BATCHES;
    MPI_Barrier(comm);
    for (i = 0; i < batch + iters; i++) { /* the first batch warms up */
        if (i >= batch && (i - batch) % batch == 0) {
            double now = MPI_Wtime();
            if (i > batch && now - t0 < best)
                best = now - t0;
            t0 = now;
        }
        if (rank == 0) {
            if (!unexpected)
                MPI_Recv(&ack, 1, MPI_INT, 1, TAG_MARK, comm, MPI_STATUS_IGNORE);
            for (t = 0; t < depth; t++) {
                int tag = unexpected ? t : depth - 1 - t;
                buf[tag] = (long)tag * 1000003L + i;
                MPI_Isend(&buf[tag], 1, MPI_LONG, 1, QTAG0 + tag, comm, &req[t]);
            }
            if (unexpected)
                MPI_Send(NULL, 0, MPI_BYTE, 1, TAG_MARK, comm);
            MPI_Waitall(depth, req, MPI_STATUSES_IGNORE);
            MPI_Recv(&ack, 1, MPI_INT, 1, TAG_ACK, comm, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            if (unexpected)
                MPI_Recv(NULL, 0, MPI_BYTE, 0, TAG_MARK, comm, MPI_STATUS_IGNORE);
            for (t = 0; t < depth; t++) {
                int tag = unexpected ? depth - 1 - t : t;
                buf[tag] = -1;
                MPI_Irecv(&buf[tag], 1, MPI_LONG, 0, QTAG0 + tag, comm, &req[t]);
            }
            if (!unexpected)
                MPI_Send(&ack, 1, MPI_INT, 0, TAG_MARK, comm);
            MPI_Waitall(depth, req, MPI_STATUSES_IGNORE);
            for (t = 0; t < depth; t++)
                if (buf[t] != (long)t * 1000003L + i)
                    die("deep queue: a message went to the wrong receive");
            MPI_Send(&ack, 1, MPI_INT, 0, TAG_ACK, comm);
        }
    }
    if (MPI_Wtime() - t0 < best)
        best = MPI_Wtime() - t0;
    if (rank == 0) {
        printf("%s %d %.0f\n", unexpected ? "qunex" : "qpost", depth,
               (double)depth * (double)batch / best);
        fflush(stdout);
    }
    free(buf);
    free(req);
}

/* ---- the multi-threaded mode (-t) ---- */

#define TAG_SYNC 4
#define TRATE_MAX 32

static int nthreads;          /* -t T; 0: the single-threaded benchmark */
static MPI_Comm *tcomm;       /* one per thread pair */
static pthread_barrier_t tbar; /* the T threads of this rank */
static double *tstart, *tend; /* per thread: the current batch's start and end */
static long tmax;
static int tdo_lat, tdo_rate;

/* Iteration counts of the multi-threaded mode: round trips per size, windows per size. */
static long tlat_iters(void) { return scaled(1000, 20); }
static long trate_iters(void) { return scaled(100, 5); }

static unsigned char tfill_byte(long size, int k)
{
    return (unsigned char)('a' + (size + 7 * k) % 26);
}

static void tspot_check(const unsigned char *buf, long size, int k, const char *what)
{
    if (size > 0 && (buf[0] != tfill_byte(size, k) || buf[size - 1] != tfill_byte(size, k))) {
        char msg[160];
        snprintf(msg, sizeof msg, "thread %d: %s: %ld-byte message arrived with wrong content", k,
                 what, size);
        die(msg);
    }
}

/* Start of a timed batch: all threads of this rank, then each pair, meet. */
static void tsync(int k)
{
    pthread_barrier_wait(&tbar);
    MPI_Sendrecv(NULL, 0, MPI_BYTE, 1 - rank, TAG_SYNC, NULL, 0, MPI_BYTE, 1 - rank, TAG_SYNC,
                 tcomm[k], MPI_STATUS_IGNORE);
}

/* The batch's time window: from the first pair's start to the last pair's end. */
static double twindow(void)
{
    double first = tstart[0], last = tend[0];
    int j;
    for (j = 1; j < nthreads; j++) {
        if (tstart[j] < first)
            first = tstart[j];
        if (tend[j] > last)
            last = tend[j];
    }
    return last - first;
}

static void tlatency(int k, unsigned char *sbuf, unsigned char *rbuf)
{
    MPI_Comm comm = tcomm[k];
    long size, i, b;
    for (size = 0; size <= tmax; size = size ? size * 4 : 1) {
        long iters = tlat_iters(), warm = iters / 10 + 1;
        long batch = (iters + BATCHES - 1) / BATCHES;
        double t, best = 1e30;
        memset(sbuf, tfill_byte(size, k), (size_t)size);
        memset(rbuf, 0, (size_t)size);
        for (b = -1; b < BATCHES; b++) { /* batch -1: warm-up */
            long n = b < 0 ? warm : batch;
            tsync(k);
            tstart[k] = MPI_Wtime();
            for (i = 0; i < n; i++) {
                if (rank == 0) {
                    MPI_Send(sbuf, (int)size, MPI_BYTE, 1, TAG_PING, comm);
                    MPI_Recv(rbuf, (int)size, MPI_BYTE, 1, TAG_PING, comm, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(rbuf, (int)size, MPI_BYTE, 0, TAG_PING, comm, MPI_STATUS_IGNORE);
                    MPI_Send(sbuf, (int)size, MPI_BYTE, 0, TAG_PING, comm);
                }
            }
            tend[k] = MPI_Wtime();
            pthread_barrier_wait(&tbar);
            if (b >= 0 && k == 0) {
                t = twindow();
                if (t < best)
                    best = t;
            }
            /* the next tsync's barrier keeps tstart[]/tend[] until thread 0 has read them */
        }
        tspot_check(rbuf, size, k, "latency");
        if (rank == 0 && k == 0) {
            printf("tlat %d %ld %.3f\n", nthreads, size, best * 1e6 / (2.0 * (double)batch));
            fflush(stdout);
        }
    }
}

static void trate(int k, unsigned char *sbuf, unsigned char *rbuf)
{
    MPI_Comm comm = tcomm[k];
    MPI_Request req[WINDOW];
    long size, i, b;
    int w, ack = 0;
    for (size = 1; size <= TRATE_MAX; size *= 2) {
        long iters = trate_iters(), warm = iters / 10 + 1;
        long batch = (iters + BATCHES - 1) / BATCHES;
        double best = 0.0;
        memset(sbuf, tfill_byte(size, k), (size_t)size);
        memset(rbuf, 0, (size_t)size * WINDOW);
        for (b = -1; b < BATCHES; b++) {
            long n = b < 0 ? warm : batch;
            tsync(k);
            tstart[k] = MPI_Wtime();
            for (i = 0; i < n; i++) {
                if (rank == 0) {
                    for (w = 0; w < WINDOW; w++)
                        MPI_Isend(sbuf, (int)size, MPI_BYTE, 1, TAG_BW, comm, &req[w]);
                    MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
                    MPI_Recv(&ack, 1, MPI_INT, 1, TAG_ACK, comm, MPI_STATUS_IGNORE);
                } else {
                    for (w = 0; w < WINDOW; w++)
                        MPI_Irecv(rbuf + (size_t)w * (size_t)size, (int)size, MPI_BYTE, 0, TAG_BW,
                                  comm, &req[w]);
                    MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
                    MPI_Send(&ack, 1, MPI_INT, 0, TAG_ACK, comm);
                }
            }
            tend[k] = MPI_Wtime();
            pthread_barrier_wait(&tbar);
            if (b >= 0 && k == 0) {
                double rate = (double)nthreads * WINDOW * (double)batch / twindow();
                if (rate > best)
                    best = rate;
            }
            /* the next tsync's barrier keeps tstart[]/tend[] until thread 0 has read them */
        }
        if (rank == 1) {
            tspot_check(rbuf, size, k, "message rate (first of window)");
            tspot_check(rbuf + (size_t)(WINDOW - 1) * (size_t)size, size, k,
                        "message rate (last of window)");
        }
        if (rank == 0 && k == 0) {
            printf("trate %d %ld %.0f\n", nthreads, size, best);
            fflush(stdout);
        }
    }
}

static void *tworker(void *arg)
{
    int k = (int)(long)arg;
    size_t rlen = (size_t)(tmax > TRATE_MAX * WINDOW ? tmax : TRATE_MAX * WINDOW);
    unsigned char *sbuf = malloc((size_t)(tmax > TRATE_MAX ? tmax : TRATE_MAX) + 1);
    unsigned char *rbuf = malloc(rlen + 1);
    if (!sbuf || !rbuf)
        die("out of memory");
    if (tdo_lat)
        tlatency(k, sbuf, rbuf);
    if (tdo_rate)
        trate(k, sbuf, rbuf);
    free(sbuf);
    free(rbuf);
    return NULL;
}

static const char *level_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "an unknown level";
    }
}

/* The whole -t run, after MPI_Init_thread. */
static int threaded(int argc, char **argv, int provided)
{
    int size, a, k, len = 0, do_lat = 1, do_bw = 1;
    long max = 4096;
    pthread_t *tids;
    char version[MPI_MAX_LIBRARY_VERSION_STRING + 1] = "";

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
        } else if (strcmp(argv[a], "-t") == 0 && a + 1 < argc) {
            nthreads = atoi(argv[++a]);
        } else {
            die("usage: p2p [-l] [-b] [-m MAX] [-i SCALE] [-t T]");
        }
    }
    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0) {
            printf("# p2p -t: MPI_THREAD_MULTIPLE not provided (got %s)\n", level_name(provided));
            fprintf(stderr, "p2p: -t %d needs MPI_THREAD_MULTIPLE; the library provides %s\n",
                    nthreads, level_name(provided));
            fflush(stdout);
        }
        MPI_Finalize();
        return 3;
    }
    if (size < 2)
        die("needs 2 ranks");
    if (nthreads < 1 || nthreads > 64 || max < 0 || max > (1L << 24) || scale <= 0.0)
        die("bad -t, -m or -i value");
    tmax = max;
    tdo_lat = do_lat;
    tdo_rate = do_bw;

    MPI_Get_library_version(version, &len);
    version[strcspn(version, "\n")] = '\0';
    if (rank == 0) {
        printf("# p2p -t: %d thread pairs (ranks 0 and 1, thread k with thread k, a communicator "
               "per pair, MPI_THREAD_MULTIPLE), latency sizes up to %ld bytes, iteration scale "
               "%g\n", nthreads, tmax, scale);
        printf("# library: %s\n", version);
        fflush(stdout);
    }
    tcomm = malloc(sizeof(MPI_Comm) * (size_t)nthreads);
    tstart = malloc(sizeof(double) * (size_t)nthreads);
    tend = malloc(sizeof(double) * (size_t)nthreads);
    tids = malloc(sizeof(pthread_t) * (size_t)nthreads);
    if (!tcomm || !tstart || !tend || !tids)
        die("out of memory");
    for (k = 0; k < nthreads; k++)
        MPI_Comm_dup(MPI_COMM_WORLD, &tcomm[k]);
    if (rank < 2) {
        if (rank == 0 && do_lat)
            printf("# one-way latency (usec) per pair, mean over the pairs: ping-pong with "
                   "MPI_Send/MPI_Recv\n");
        if (rank == 0 && do_bw)
            printf("# message rate (messages/s) of all pairs together: windows of %d "
                   "MPI_Isend/MPI_Irecv, then a 4-byte ack\n", WINDOW);
        if (pthread_barrier_init(&tbar, NULL, (unsigned)nthreads) != 0)
            die("pthread_barrier_init failed");
        for (k = 0; k < nthreads; k++)
            if (pthread_create(&tids[k], NULL, tworker, (void *)(long)k) != 0)
                die("pthread_create failed");
        for (k = 0; k < nthreads; k++)
            pthread_join(tids[k], NULL);
        pthread_barrier_destroy(&tbar);
    }
    for (k = 0; k < nthreads; k++)
        MPI_Comm_free(&tcomm[k]);
    MPI_Barrier(MPI_COMM_WORLD);
    free(tcomm);
    free(tstart);
    free(tend);
    free(tids);
    MPI_Finalize();
    return 0;
}

int main(int argc, char **argv)
{
    int size, a, do_lat = 1, do_bw = 1, len = 0, hints = 0, depth = 0;
    long max = 4L << 20, min = 0;
    unsigned char *sbuf, *rbuf;
    char version[MPI_MAX_LIBRARY_VERSION_STRING + 1] = "";

    for (a = 1; a < argc; a++) {
        if (strcmp(argv[a], "-t") == 0) {
            int provided = MPI_THREAD_SINGLE;
            MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
            return threaded(argc, argv, provided);
        }
    }
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
        } else if (strcmp(argv[a], "-s") == 0 && a + 1 < argc) {
            min = atol(argv[++a]);
        } else if (strcmp(argv[a], "-i") == 0 && a + 1 < argc) {
            scale = atof(argv[++a]);
        } else if (strcmp(argv[a], "-q") == 0 && a + 1 < argc) {
            depth = atoi(argv[++a]);
            if (depth < 1 || depth > 65536)
                die("-q DEPTH: 1 .. 65536");
        } else if (strcmp(argv[a], "--hints") == 0) {
            hints = 1;
        } else {
            die("usage: p2p [-l] [-b] [-s MIN] [-m MAX] [-i SCALE] [-q DEPTH] [--hints]");
        }
    }
    comm = MPI_COMM_WORLD;
    if (hints) {
        MPI_Info info;
        MPI_Info_create(&info);
        MPI_Info_set(info, "mpi_assert_no_any_source", "true");
        MPI_Info_set(info, "mpi_assert_no_any_tag", "true");
        MPI_Info_set(info, "mpi_assert_allow_overtaking", "true");
        MPI_Info_set(info, "mpi_assert_exact_length", "true");
        MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &comm);
        MPI_Info_free(&info);
    }
    if (size < 2)
        die("needs 2 ranks");
    if (max < 1 || max > (1L << 30) || min < 0 || min > max || scale <= 0.0)
        die("bad -s, -m or -i value");

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
        if (hints)
            printf("# on a dup of MPI_COMM_WORLD with the four mpi_assert_* hints\n");
        fflush(stdout);
    }
    if (depth > 0) {
        if (rank == 0) {
            printf("# deep queue (msgs/s): %d receives or messages of distinct tags waiting\n",
                   depth);
            fflush(stdout);
        }
        deep_queue(depth, 0);
        deep_queue(depth, 1);
    } else {
        if (do_lat)
            latency(min, max, sbuf, rbuf);
        if (do_bw)
            bandwidth(min, max, sbuf, rbuf);
    }

    free(sbuf);
    free(rbuf);
    if (hints)
        MPI_Comm_free(&comm);
    MPI_Finalize();
    return 0;
}
