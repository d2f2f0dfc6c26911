/*
 * shm_pingpong.c - the machine's floor for a one-way message between two processes: a ping-pong
 * of one 8-byte flag each way through shared memory (each flag on its own cache line), no
 * library at all. Whatever an MPI or a Portals NI adds to a 0-byte message is measured against
 * this.
 *
 * usage: shm_pingpong RANK NAME   (start ranks 0 and 1 with the same NAME, a file in /dev/shm
 *                                  that rank 0 removes at the end)
 * Rank 0 prints "floor <usec>": the best of 40 batches of 1000 round trips, half a round trip.
 */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct line {
    _Atomic long v;
    char pad[56];
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (argv[1][0] != '0' && argv[1][0] != '1')) {
        fprintf(stderr, "usage: shm_pingpong 0|1 NAME\n");
        return 2;
    }
    int r = argv[1][0] - '0';
    char path[256];
    snprintf(path, sizeof path, "/dev/shm/%s", argv[2]);
    int fd = open(path, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, 4096) != 0) {
        perror(path);
        return 1;
    }
    struct line *l = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (l == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    /* Lines 0 and 1 carry the ping-pong, 2 and 3 say each rank is there. */
    atomic_store(&l[2 + r].v, 1);
    while (atomic_load(&l[3 - r].v) != 1)
        sched_yield();
    double best = 1e9;
    long seq = 0;
    for (int b = 0; b < 40; b++) {
        double t0 = now();
        for (int i = 0; i < 1000; i++) {
            seq++;
            if (r == 0) {
                atomic_store_explicit(&l[1].v, seq, memory_order_release);
                while (atomic_load_explicit(&l[0].v, memory_order_acquire) != seq)
                    ;
            } else {
                while (atomic_load_explicit(&l[1].v, memory_order_acquire) != seq)
                    ;
                atomic_store_explicit(&l[0].v, seq, memory_order_release);
            }
        }
        double d = (now() - t0) * 1e6 / 2000;
        if (d < best)
            best = d;
    }
    if (r == 0) {
        printf("floor %.3f\n", best);
        unlink(path);
    }
    return 0;
}
