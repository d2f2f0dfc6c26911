/*
 * datatype.c - the datatype engine under load: non-contiguous point-to-point transfers, and
 * typed (MPI_INT) against untyped (MPI_BYTE) streaming bandwidth, between ranks 0 and 1.
 *
 * Modes (one or more may be given):
 *   vector   one column of an N x N row-major matrix of doubles (N = 4096: 32 KiB of payload),
 *            MPI_Type_vector(N, 1, N, MPI_DOUBLE), ping-pong between ranks 0 and 1. Rank 0 sends
 *            column 0 of its matrix with the column type and receives the answer into column 1;
 *            rank 1 receives
 *              vec-vec     into column 0 of its own matrix (column type) and sends that back,
 *              vec-contig  into a contiguous array of N doubles and sends that back (count N);
 *            for context, contig sends the same N doubles contiguously on both sides.
 *   halo     faces of a 3-D array of M x M x M doubles (M = 128; C order, index [x][y][z], so z
 *            is the fastest), each an MPI_Type_create_subarray (M*M doubles, 128 KiB), ping-pong:
 *            rank 0 sends its face at 0 and receives the answer into the opposite face (at M-1,
 *            a ghost layer); rank 1 receives into its face at 0 and sends that back:
 *              face-x   1 x M x M: in memory one contiguous block (the engine should notice),
 *              face-y   M x 1 x M: M blocks of M doubles, stride M*M,
 *              face-z   M x M x 1: M*M single doubles, stride M;
 *            contig sends M*M doubles contiguously, for context.
 *   intbyte  streaming bandwidth, windows of W MPI_Isend / MPI_Irecv (distinct receive buffers)
 *            and a 4-byte acknowledgement, for message sizes 1 KiB, 4 KiB, ... MAX: the message
 *            sent as count N of MPI_INT (int) against the same bytes as count 4N of MPI_BYTE
 *            (byte). Between ranks of different architectures MPI_INT is converted by the
 *            receiver and MPI_BYTE is not; the program assumes nothing about the peer: ints
 *            are checked by value (equal to their index), bytes byte by byte.
 *
 * Timing: each case is first run with a growing number of iterations until one run takes at
 * least half of a batch time (the warm-up), then in 5 batches of about a fifth of the target time
 * each; the best batch is reported. Rank 0 times and decides, and tells rank 1 the counts.
 * After each case the received buffers are checked once, element by element (the receive
 * buffers start filled with a sentinel), so a broken transfer is an error, not a fast result.
 *
 * Output (rank 0), comments start with '#', one line per case:
 *     res MODE CASE DIR BYTES USEC MBPS
 * DIR is pp for a ping-pong (USEC is the one-way time: half a round trip), 0>1 or 1>0 for
 * streaming (USEC is the time per message); BYTES is the payload of one message, MBPS its rate in
 * 10^6 bytes per second.
 *
 * usage: datatype MODE... [-t SECONDS] [-n DIM] [-m MAX] [-w WINDOW] [-d 01|10|both]
 *   -t SECONDS  target time per case (default 0.5)
 *   -n DIM      matrix dimension for vector (default 4096), cube edge for halo (default 128)
 *   -m MAX      intbyte: largest message in bytes (default 4194304; a multiple of 4)
 *   -w WINDOW   intbyte: messages per window (default 16)
 *   -d DIR      intbyte: 01 rank 0 sends (default), 10 rank 1 sends, both
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
/* GCC 12 takes MPI_STATUSES_IGNORE for a zero-sized array of statuses */
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

#define BATCHES 5
#define MAX_ITERS (1L << 28)
#define TAG_DATA 1
#define TAG_ACK 2
#define TAG_CTL 3
#define SENTINEL (-1.0)

static int rank;
static double target = 0.5;

static void die(const char *msg)
{
    fprintf(stderr, "datatype: rank %d: %s\n", rank, msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        die("out of memory");
    return p;
}

static void check_rc(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING + 128], err[MPI_MAX_ERROR_STRING + 1] = "";
        int len = 0;
        MPI_Error_string(rc, err, &len);
        snprintf(msg, sizeof msg, "%s failed: %s", what, err);
        die(msg);
    }
}

/* rank 0 tells rank 1 a few ints (portable: MPI_INT is converted between architectures) */
static void share(int *v, int n)
{
    if (rank == 0)
        MPI_Send(v, n, MPI_INT, 1, TAG_CTL, MPI_COMM_WORLD);
    else
        MPI_Recv(v, n, MPI_INT, 0, TAG_CTL, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

/* the value stored at linear index k (exact in a double) */
static double val(long k) { return (double)k + 0.25; }

/* ---- one transfer case ---- */
struct side {
    void *sbuf, *rbuf;
    int scount, rcount;
    MPI_Datatype stype, rtype;
};

struct xfer {
    int stream;        /* 0: ping-pong; 1: streaming windows */
    int sender;        /* streaming: the rank that sends */
    int window;        /* streaming: messages per window */
    size_t rstride;    /* streaming: bytes between the window's receive buffers */
    struct side me;    /* this rank's buffers and types */
};

static void pingpong(const struct xfer *x, long n)
{
    long i;
    const struct side *s = &x->me;
    for (i = 0; i < n; i++) {
        if (rank == 0) {
            MPI_Send(s->sbuf, s->scount, s->stype, 1, TAG_DATA, MPI_COMM_WORLD);
            MPI_Recv(s->rbuf, s->rcount, s->rtype, 1, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(s->rbuf, s->rcount, s->rtype, 0, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(s->sbuf, s->scount, s->stype, 0, TAG_DATA, MPI_COMM_WORLD);
        }
    }
}

static void stream(const struct xfer *x, long n)
{
    long i;
    int w, ack = 0;
    int peer = 1 - rank;
    const struct side *s = &x->me;
    MPI_Request req[256];
    for (i = 0; i < n; i++) {
        if (rank == x->sender) {
            for (w = 0; w < x->window; w++)
                MPI_Isend(s->sbuf, s->scount, s->stype, peer, TAG_DATA, MPI_COMM_WORLD, &req[w]);
            MPI_Waitall(x->window, req, MPI_STATUSES_IGNORE);
            MPI_Recv(&ack, 1, MPI_INT, peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (w = 0; w < x->window; w++)
                MPI_Irecv((char *)s->rbuf + (size_t)w * x->rstride, s->rcount, s->rtype, peer,
                          TAG_DATA, MPI_COMM_WORLD, &req[w]);
            MPI_Waitall(x->window, req, MPI_STATUSES_IGNORE);
            MPI_Send(&ack, 1, MPI_INT, peer, TAG_ACK, MPI_COMM_WORLD);
        }
    }
}

static double timed(const struct xfer *x, long n)
{
    double t0 = MPI_Wtime();
    if (x->stream)
        stream(x, n);
    else
        pingpong(x, n);
    return MPI_Wtime() - t0;
}

/* calibrate and warm up: grow the iteration count until one run takes at least half a batch
 * time (a run of a full batch after a jump, normally), then the best of BATCHES batches; returns
 * seconds per iteration (meaningful on rank 0) */
static double measure(const struct xfer *x)
{
    long n = 1;
    int ctl[2], b;
    double t, best = 1e30, batch_time = target / BATCHES;
    for (;;) {
        t = timed(x, n);
        if (rank == 0) {
            double want = (double)n * batch_time / (t > 1e-9 ? t : 1e-9);
            if (t < batch_time / 100.0)
                want = (double)n * 8.0;
            ctl[0] = t >= batch_time / 2.0 || n >= MAX_ITERS;
            ctl[1] = want < 1.0 ? 1 : want > (double)MAX_ITERS ? (int)MAX_ITERS : (int)want;
        }
        share(ctl, 2);
        n = ctl[1];
        if (ctl[0])
            break;
    }
    for (b = 0; b < BATCHES; b++) {
        t = timed(x, n);
        if (t < best)
            best = t;
    }
    return best / (double)n;
}

static void report(const char *mode, const char *name, const char *dir, long bytes, double usec)
{
    if (rank == 0) {
        printf("res %s %s %s %ld %.3f %.1f\n", mode, name, dir, bytes, usec,
               (double)bytes / usec);
        fflush(stdout);
    }
}

static void check_doubles(const double *got, long n, long first_idx, long step, const char *what)
{
    long i;
    for (i = 0; i < n; i++) {
        double want = val(first_idx + i * step);
        if (got[i] != want) {
            char msg[256];
            snprintf(msg, sizeof msg, "%s: element %ld is %g, expected %g", what, i, got[i], want);
            die(msg);
        }
    }
}

/* ---- vector ---- */
static void mode_vector(long dim)
{
    long n = dim, i, j;
    long bytes = n * (long)sizeof(double);
    MPI_Datatype col;
    double *mat = xmalloc((size_t)(n * n) * sizeof(double));
    double *vec = xmalloc((size_t)n * sizeof(double));
    double *vec2 = xmalloc((size_t)n * sizeof(double));
    struct xfer x;
    int variant;
    char what[64];

    check_rc(MPI_Type_vector((int)n, 1, (int)n, MPI_DOUBLE, &col), "MPI_Type_vector");
    check_rc(MPI_Type_commit(&col), "MPI_Type_commit");
    if (rank == 0)
        printf("# vector: one column of a %ldx%ld matrix of doubles, %ld bytes, ping-pong\n", n, n,
               bytes);

    /* rank 0's matrix holds val(index) except column 1 (the answer lands there);
     * rank 1's matrix is all sentinel */
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++)
            mat[i * n + j] = rank == 0 && j != 1 ? val(i * n + j) : SENTINEL;

    for (variant = 0; variant < 3; variant++) {
        static const char *names[] = {"contig", "vec-vec", "vec-contig"};
        memset(&x, 0, sizeof x);
        /* reset the receive buffers */
        for (i = 0; i < n; i++) {
            vec[i] = rank == 0 ? val(i * n) : SENTINEL; /* rank 0: contiguous send buffer */
            vec2[i] = SENTINEL;
            mat[i * n + (rank == 0 ? 1 : 0)] = SENTINEL;
        }
        if (variant == 0) {
            x.me.sbuf = rank == 0 ? vec : vec2;
            x.me.rbuf = vec2;
            x.me.stype = x.me.rtype = MPI_DOUBLE;
            x.me.scount = x.me.rcount = (int)n;
        } else if (rank == 0) {
            x.me.sbuf = mat;     /* column 0 */
            x.me.rbuf = mat + 1; /* column 1 */
            x.me.stype = x.me.rtype = col;
            x.me.scount = x.me.rcount = 1;
        } else if (variant == 1) {
            x.me.sbuf = x.me.rbuf = mat; /* column 0 */
            x.me.stype = x.me.rtype = col;
            x.me.scount = x.me.rcount = 1;
        } else {
            x.me.sbuf = x.me.rbuf = vec;
            x.me.stype = x.me.rtype = MPI_DOUBLE;
            x.me.scount = x.me.rcount = (int)n;
        }
        report("vector", names[variant], "pp", bytes, measure(&x) / 2.0 * 1e6);

        /* check once */
        snprintf(what, sizeof what, "vector %s", names[variant]);
        if (variant == 0) {
            check_doubles(vec2, n, 0, n, what);
        } else if (rank == 0 || variant == 1) {
            for (i = 0; i < n; i++)
                for (j = 0; j < n; j++) {
                    double want = rank == 0 ? val(i * n + (j == 1 ? 0 : j)) : j == 0 ? val(i * n) : SENTINEL;
                    if (mat[i * n + j] != want) {
                        char msg[256];
                        snprintf(msg, sizeof msg, "%s: matrix[%ld][%ld] is %g, expected %g", what, i,
                                 j, mat[i * n + j], want);
                        die(msg);
                    }
                }
        } else {
            check_doubles(vec, n, 0, n, what);
        }
    }
    MPI_Type_free(&col);
    free(mat);
    free(vec);
    free(vec2);
}

/* ---- halo ---- */
static void mode_halo(long edge)
{
    long m = edge, plane = m * m, total = m * m * m, x0, y0, z0, k;
    long bytes = plane * (long)sizeof(double);
    double *cube = xmalloc((size_t)total * sizeof(double));
    double *vec = xmalloc((size_t)plane * sizeof(double));
    double *vec2 = xmalloc((size_t)plane * sizeof(double));
    int sizes[3] = {(int)m, (int)m, (int)m};
    int variant;
    struct xfer x;
    char what[64];

    if (rank == 0)
        printf("# halo: faces of a %ldx%ldx%ld array of doubles (C order), %ld bytes, ping-pong\n", m,
               m, m, bytes);
    for (variant = 0; variant < 4; variant++) {
        static const char *names[] = {"contig", "face-x", "face-y", "face-z"};
        int d = variant - 1; /* the dimension the face is normal to */
        MPI_Datatype lo = MPI_DATATYPE_NULL, hi = MPI_DATATYPE_NULL;
        memset(&x, 0, sizeof x);
        /* rank 0: val(index) everywhere but the high face (the answer lands there); rank 1: all
         * sentinel */
        for (x0 = 0; x0 < m; x0++)
            for (y0 = 0; y0 < m; y0++)
                for (z0 = 0; z0 < m; z0++) {
                    long c[3] = {x0, y0, z0};
                    k = (x0 * m + y0) * m + z0;
                    cube[k] = rank == 0 && !(d >= 0 && c[d] == m - 1) ? val(k) : SENTINEL;
                }
        for (k = 0; k < plane; k++) {
            vec[k] = rank == 0 ? val(k) : SENTINEL;
            vec2[k] = SENTINEL;
        }
        if (variant == 0) {
            x.me.sbuf = rank == 0 ? vec : vec2;
            x.me.rbuf = vec2;
            x.me.stype = x.me.rtype = MPI_DOUBLE;
            x.me.scount = x.me.rcount = (int)plane;
        } else {
            int sub[3] = {(int)m, (int)m, (int)m}, starts[3] = {0, 0, 0};
            sub[d] = 1;
            check_rc(MPI_Type_create_subarray(3, sizes, sub, starts, MPI_ORDER_C, MPI_DOUBLE, &lo),
                     "MPI_Type_create_subarray");
            starts[d] = (int)m - 1;
            check_rc(MPI_Type_create_subarray(3, sizes, sub, starts, MPI_ORDER_C, MPI_DOUBLE, &hi),
                     "MPI_Type_create_subarray");
            check_rc(MPI_Type_commit(&lo), "MPI_Type_commit");
            check_rc(MPI_Type_commit(&hi), "MPI_Type_commit");
            x.me.sbuf = x.me.rbuf = cube;
            x.me.stype = lo;
            x.me.rtype = rank == 0 ? hi : lo;
            x.me.scount = x.me.rcount = 1;
        }
        report("halo", names[variant], "pp", bytes, measure(&x) / 2.0 * 1e6);

        snprintf(what, sizeof what, "halo %s", names[variant]);
        if (variant == 0) {
            check_doubles(vec2, plane, 0, 1, what);
        } else {
            for (x0 = 0; x0 < m; x0++)
                for (y0 = 0; y0 < m; y0++)
                    for (z0 = 0; z0 < m; z0++) {
                        long c[3] = {x0, y0, z0};
                        double want;
                        k = (x0 * m + y0) * m + z0;
                        if (rank == 0) {
                            if (c[d] == m - 1) {
                                c[d] = 0; /* the answer is rank 0's own face at 0 */
                                want = val((c[0] * m + c[1]) * m + c[2]);
                            } else {
                                want = val(k);
                            }
                        } else {
                            want = c[d] == 0 ? val(k) : SENTINEL;
                        }
                        if (cube[k] != want) {
                            char msg[256];
                            snprintf(msg, sizeof msg, "%s: a[%ld][%ld][%ld] is %g, expected %g",
                                     what, x0, y0, z0, cube[k], want);
                            die(msg);
                        }
                    }
            MPI_Type_free(&lo);
            MPI_Type_free(&hi);
        }
    }
    free(cube);
    free(vec);
    free(vec2);
}

/* ---- intbyte ---- */
static void mode_intbyte(long max, int window, int dirs)
{
    unsigned char *sbuf = xmalloc((size_t)max);
    unsigned char *rbuf = xmalloc((size_t)max * (size_t)window);
    long size, i;
    int dir, is_byte, w;
    struct xfer x;
    char what[96];

    if (rank == 0)
        printf("# intbyte: streaming, windows of %d messages then a 4-byte ack; MPI_INT count N vs "
               "MPI_BYTE count 4N\n", window);
    for (dir = 0; dir < 2; dir++) {
        if (!(dirs & (1 << dir)))
            continue;
        for (size = 1024; size <= max; size *= 4) {
            for (is_byte = 0; is_byte < 2; is_byte++) {
                long nints = size / 4;
                int sender = dir; /* dir 0: rank 0 sends; dir 1: rank 1 sends */
                memset(&x, 0, sizeof x);
                if (is_byte)
                    for (i = 0; i < size; i++)
                        sbuf[i] = (unsigned char)(i % 251);
                else
                    for (i = 0; i < nints; i++)
                        ((int *)(void *)sbuf)[i] = (int)i;
                memset(rbuf, 0xee, (size_t)size * (size_t)window);
                x.stream = 1;
                x.sender = sender;
                x.window = window;
                x.rstride = (size_t)size;
                x.me.sbuf = sbuf;
                x.me.rbuf = rbuf;
                x.me.stype = x.me.rtype = is_byte ? MPI_BYTE : MPI_INT;
                x.me.scount = x.me.rcount = (int)(is_byte ? size : nints);
                report("intbyte", is_byte ? "byte" : "int", dir ? "1>0" : "0>1", size,
                       measure(&x) / (double)window * 1e6);

                if (rank != sender) {
                    for (w = 0; w < window; w += window > 1 ? window - 1 : 1) {
                        const unsigned char *r = rbuf + (size_t)w * (size_t)size;
                        snprintf(what, sizeof what, "intbyte %s %ld bytes, message %d of the window",
                                 is_byte ? "byte" : "int", size, w);
                        for (i = 0; i < (is_byte ? size : nints); i++) {
                            int ok = is_byte ? r[i] == (unsigned char)(i % 251)
                                             : ((const int *)(const void *)r)[i] == (int)i;
                            if (!ok) {
                                char msg[256];
                                snprintf(msg, sizeof msg, "%s: element %ld is wrong", what, i);
                                die(msg);
                            }
                        }
                    }
                }
            }
        }
    }
    free(sbuf);
    free(rbuf);
}

static const char *arch_name(void)
{
#if defined(__x86_64__)
    return "x86_64";
#elif defined(__i386__)
    return "i686";
#elif defined(__s390x__)
    return "s390x";
#elif defined(__aarch64__)
    return "aarch64";
#elif defined(__powerpc64__)
    return "ppc64";
#else
    return "other";
#endif
}

/* rank 0 prints both ranks' architecture, byte order and sizes */
static void describe(void)
{
    const unsigned one = 1;
    int info[3];
    char name[16];
    info[0] = *(const unsigned char *)&one == 0; /* big-endian */
    info[1] = (int)sizeof(long);
    info[2] = (int)sizeof(void *);
    memset(name, 0, sizeof name);
    strncpy(name, arch_name(), sizeof name - 1);
    if (rank == 0) {
        int r;
        for (r = 0; r < 2; r++) {
            if (r == 1) {
                MPI_Recv(info, 3, MPI_INT, 1, TAG_CTL, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Recv(name, (int)sizeof name, MPI_CHAR, 1, TAG_CTL, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
                name[sizeof name - 1] = '\0';
            }
            printf("# rank %d: %s, %s-endian, long %d bytes, pointer %d bytes\n", r, name,
                   info[0] ? "big" : "little", info[1], info[2]);
        }
    } else {
        MPI_Send(info, 3, MPI_INT, 0, TAG_CTL, MPI_COMM_WORLD);
        MPI_Send(name, (int)sizeof name, MPI_CHAR, 0, TAG_CTL, MPI_COMM_WORLD);
    }
}

static void usage(void)
{
    die("usage: datatype MODE... (vector, halo, intbyte) [-t SECONDS] [-n DIM] [-m MAX] "
        "[-w WINDOW] [-d 01|10|both]");
}

int main(int argc, char **argv)
{
    int size, a, len = 0, window = 16, dirs = 1, nmodes = 0, i;
    long max = 4L << 20, dim = 0;
    const char *modes[8];
    char version[MPI_MAX_LIBRARY_VERSION_STRING + 1] = "";

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (a = 1; a < argc; a++) {
        if (strcmp(argv[a], "-t") == 0 && a + 1 < argc) {
            target = atof(argv[++a]);
        } else if (strcmp(argv[a], "-n") == 0 && a + 1 < argc) {
            dim = atol(argv[++a]);
        } else if (strcmp(argv[a], "-m") == 0 && a + 1 < argc) {
            max = atol(argv[++a]);
        } else if (strcmp(argv[a], "-w") == 0 && a + 1 < argc) {
            window = atoi(argv[++a]);
        } else if (strcmp(argv[a], "-d") == 0 && a + 1 < argc) {
            a++;
            dirs = strcmp(argv[a], "01") == 0 ? 1 : strcmp(argv[a], "10") == 0 ? 2
                 : strcmp(argv[a], "both") == 0 ? 3 : 0;
            if (!dirs)
                usage();
        } else if (argv[a][0] != '-' && nmodes < 8 &&
                   (strcmp(argv[a], "vector") == 0 || strcmp(argv[a], "halo") == 0 ||
                    strcmp(argv[a], "intbyte") == 0)) {
            modes[nmodes++] = argv[a];
        } else {
            usage();
        }
    }
    if (nmodes == 0)
        usage();
    if (size < 2)
        die("needs 2 ranks");
    if (target <= 0.0 || max < 1024 || max > (1L << 28) || max % 4 != 0 || window < 1 ||
        window > 256 || dim < 0 || dim > 65536)
        die("bad -t, -m, -w or -n value");

    MPI_Get_library_version(version, &len);
    version[strcspn(version, "\n")] = '\0';
    if (rank == 0) {
        printf("# datatype: %d ranks (ranks 0 and 1 measure), target %g s per case\n", size, target);
        printf("# library: %s\n", version);
        fflush(stdout);
    }
    if (rank < 2) {
        describe();
        for (i = 0; i < nmodes; i++) {
            if (strcmp(modes[i], "vector") == 0)
                mode_vector(dim ? dim : 4096);
            else if (strcmp(modes[i], "halo") == 0)
                mode_halo(dim ? dim : 128);
            else
                mode_intbyte(max, window, dirs);
        }
    }
    MPI_Finalize();
    return 0;
}
