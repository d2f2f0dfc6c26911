/*
 * cma_raw.c - the bandwidth of process_vm_readv itself between two processes, the ceiling of
 * any single-copy shared-memory transport (bench/p2p.c's bandwidth test, minus MPI).
 *
 * The parent fills a buffer and waits; a forked child reads it with process_vm_readv, the
 * whole buffer in one call, into 64 distinct destination buffers in turn (as p2p.c's receiver
 * fills a window of 64 receive buffers), repeated; the timed reads run in 5 equal batches and
 * the best batch is reported, like p2p.c. Sizes MIN, 2 MIN ... MAX.
 *
 * Output, one line per size (comments start with '#'):
 *     cma <bytes> <MB/s>
 * Each read is checked (first and last byte), so a failed read is an error, not a fast result.
 *
 * usage: cma_raw [-s MIN] [-m MAX] [-i SCALE]   (defaults: 1 MiB, 16 MiB, 1)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WINDOW 64
#define BATCHES 5

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void read_all(pid_t pid, void *remote, unsigned char *dest, size_t len)
{
    size_t done = 0;
    while (done < len) {
        struct iovec local = {dest + done, len - done};
        struct iovec far = {(unsigned char *)remote + done, len - done};
        ssize_t n = process_vm_readv(pid, &local, 1, &far, 1, 0);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            perror("cma_raw: process_vm_readv");
            exit(1);
        }
        done += (size_t)n;
    }
}

int main(int argc, char **argv)
{
    long min = 1L << 20, max = 16L << 20, size;
    double scale = 1.0;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "-s") == 0 && a + 1 < argc)
            min = atol(argv[++a]);
        else if (strcmp(argv[a], "-m") == 0 && a + 1 < argc)
            max = atol(argv[++a]);
        else if (strcmp(argv[a], "-i") == 0 && a + 1 < argc)
            scale = atof(argv[++a]);
        else {
            fprintf(stderr, "usage: cma_raw [-s MIN] [-m MAX] [-i SCALE]\n");
            return 2;
        }
    }
    if (min < 1 || max < min || max > (1L << 30) || scale <= 0.0) {
        fprintf(stderr, "cma_raw: bad -s, -m or -i value\n");
        return 2;
    }
    unsigned char *src = malloc((size_t)max);
    if (!src) {
        perror("cma_raw: malloc");
        return 1;
    }
    memset(src, 'x', (size_t)max);
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) {
        perror("cma_raw: fork");
        return 1;
    }
    if (child > 0) {
        int st = 0;
        waitpid(child, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    }
    /* The child: src here is its own copy-on-write view; it reads the parent's. */
    unsigned char *dest = malloc((size_t)max * WINDOW);
    if (!dest) {
        perror("cma_raw: malloc");
        return 1;
    }
    memset(dest, 0, (size_t)max * WINDOW);
    printf("# process_vm_readv bandwidth (MB/s): one call per buffer, %d destination buffers in "
           "turn, best of %d batches\n", WINDOW, BATCHES);
    for (size = min; size <= max; size *= 2) {
        /* As many bytes per batch as p2p.c's bandwidth test moves at this size. */
        long iters = (long)((double)(8192L * 200 / size) * scale);
        if (iters < 5)
            iters = 5;
        long batch = (iters + BATCHES - 1) / BATCHES, reads = batch * WINDOW;
        double best = 1e30;
        for (int b = -1; b < BATCHES; b++) {
            double t0 = now();
            for (long r = 0; r < reads; r++) {
                unsigned char *d = dest + (size_t)(r % WINDOW) * (size_t)size;
                read_all(parent, src, d, (size_t)size);
                if (d[0] != 'x' || d[size - 1] != 'x') {
                    fprintf(stderr, "cma_raw: a %ld-byte read arrived with wrong content\n", size);
                    return 1;
                }
            }
            double t = now() - t0;
            if (b >= 0 && t < best) /* batch -1 warms up */
                best = t;
        }
        printf("cma %ld %.2f\n", size, (double)size * (double)reads / best / 1e6);
        fflush(stdout);
    }
    return 0;
}
