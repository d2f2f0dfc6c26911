/*
 * buffer_reuse.c - large messages from and into buffers that are reused, freed and allocated
 * again at the same address, unmapped and mapped again, or dropped with madvise, between two
 * messages: what a registration cache must notice (2 ranks, rank 0 sends, rank 1 receives).
 *
 *   1. one buffer on each side sends (receives) two messages: the second finds the first's
 *      registration;
 *   2. malloc/free/malloc of the same size (large blocks are mmapped: M_MMAP_THRESHOLD fixed at
 *      128 KiB), on both sides, until the new block lands where the old one was;
 *   3. mmap/munmap/mmap of the same size, on both sides;
 *   4. madvise(MADV_DONTNEED) of the buffers between two messages.
 * Every message carries its own pattern and the receiver checks every byte: a registration
 * left over from the old memory moves the old pages (the software verbs device fails such a use).
 * Rank 0 prints "REUSED <n>": how many times (2) and (3) got the same address back.
 *
 * usage: buffer_reuse [bytes]   (default 1 MiB)
 */
#define _GNU_SOURCE
#include "stormtest.h"

#include <malloc.h>
#include <sys/mman.h>

static int rank;
static size_t n;
static int seq;

/* One message from rank 0's `buf` into rank 1's `buf`. */
static void transfer(unsigned char *buf, const char *what)
{
    uint64_t key = test_key(0, 1, n, seq++);
    if (rank == 0) {
        pattern_fill(buf, n, key);
        CHECK_MPI(MPI_Send(buf, (int)n, MPI_BYTE, 1, seq, MPI_COMM_WORLD));
    } else {
        memset(buf, 0xEE, n);
        CHECK_MPI(MPI_Recv(buf, (int)n, MPI_BYTE, 0, seq, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        long bad = pattern_check(buf, n, key);
        CHECK(bad < 0, "%s: message %d differs at byte %ld", what, seq, bad);
    }
}

static unsigned char *map(void *hint)
{
    void *p = mmap(hint, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED, "mmap of %zu bytes failed", n);
    return p;
}

int main(int argc, char **argv)
{
    int size, i, reused = 0;
    MPI_Init(&argc, &argv);
    test_begin("buffer_reuse");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size == 2, "needs 2 ranks, has %d", size);
    n = argc > 1 ? (size_t)atol(argv[1]) : (size_t)1 << 20;
    CHECK(n >= 4096, "bytes %zu: at least a page", n);
    /* A fixed threshold: a freed large block is unmapped, and the next lands in its place. */
    mallopt(M_MMAP_THRESHOLD, 128 << 10);

    /* 1. The same buffer twice. */
    unsigned char *buf = malloc(n);
    CHECK(buf != NULL, "malloc");
    transfer(buf, "same buffer");
    transfer(buf, "same buffer");
    free(buf);

    /* 2. Freed and allocated again, until it comes back at the same address. */
    for (i = 0; i < 4; i++) {
        unsigned char *a = malloc(n);
        CHECK(a != NULL, "malloc");
        transfer(a, "malloc");
        free(a);
        unsigned char *b = malloc(n);
        CHECK(b != NULL, "malloc");
        if (b == a)
            reused++;
        transfer(b, "malloc after free");
        free(b);
    }

    /* 3. Unmapped and mapped again (at the old address if the kernel agrees). */
    for (i = 0; i < 2; i++) {
        unsigned char *a = map(NULL);
        transfer(a, "mmap");
        CHECK(munmap(a, n) == 0, "munmap");
        unsigned char *b = map(a);
        if (b == a)
            reused++;
        transfer(b, "mmap after munmap");
        CHECK(munmap(b, n) == 0, "munmap");
    }

    /* 4. Pages dropped under a live buffer. */
    buf = map(NULL);
    transfer(buf, "before madvise");
    CHECK(madvise(buf, n, MADV_DONTNEED) == 0, "madvise");
    transfer(buf, "after madvise");
    munmap(buf, n);

    if (rank == 0) {
        printf("REUSED %d\n", reused);
        fflush(stdout);
    }
    return test_end();
}
