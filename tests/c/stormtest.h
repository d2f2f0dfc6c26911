/*
 * stormtest.h - tiny helpers shared by the stormpi C test programs.
 *
 * Every test program includes this header first.  It gives:
 *   test_begin(name)      record the test name and this process's rank
 *   FAIL(fmt, ...)        print "FAIL <name>: rank R: <message>" to stderr and MPI_Abort(1)
 *   CHECK(cond, fmt, ...) FAIL unless cond holds
 *   CHECK_MPI(call)       FAIL unless the MPI call returned MPI_SUCCESS
 *   test_end()            barrier, "OK <name>" on rank 0, MPI_Finalize; returns 0 for main
 *   test_sleep_ms(ms)     sleep without spinning (nanosleep)
 *   pattern_fill/pattern_check  deterministic byte patterns seeded from a 64-bit key
 *
 * Only standard C99, POSIX nanosleep and the MPI subset listed in tests/c/README.md are used.
 */
#ifndef STORMTEST_H
#define STORMTEST_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *stormtest_name = "unnamed";
static int stormtest_rank = -1;

#define FAIL(...)                                                              \
    do {                                                                       \
        fprintf(stderr, "FAIL %s: rank %d: ", stormtest_name, stormtest_rank); \
        fprintf(stderr, __VA_ARGS__);                                          \
        fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__);                     \
        fflush(stderr);                                                        \
        MPI_Abort(MPI_COMM_WORLD, 1);                                          \
        exit(1);                                                               \
    } while (0)

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond))                                                           \
            FAIL(__VA_ARGS__);                                                 \
    } while (0)

#define CHECK_MPI(call)                                                        \
    do {                                                                       \
        int check_mpi_rc_ = (call);                                            \
        if (check_mpi_rc_ != MPI_SUCCESS) {                                    \
            char check_mpi_msg_[MPI_MAX_ERROR_STRING] = "";                    \
            int check_mpi_len_ = 0;                                            \
            MPI_Error_string(check_mpi_rc_, check_mpi_msg_, &check_mpi_len_);  \
            FAIL("%s returned %d (%s)", #call, check_mpi_rc_, check_mpi_msg_); \
        }                                                                      \
    } while (0)

/* Call right after MPI_Init. */
static inline void test_begin(const char *name)
{
    stormtest_name = name;
    MPI_Comm_rank(MPI_COMM_WORLD, &stormtest_rank);
}

/* Barrier so every rank got here, then report success and finalize. */
static inline int test_end(void)
{
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (stormtest_rank == 0) {
        printf("OK %s\n", stormtest_name);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}

static inline void test_sleep_ms(int ms)
{
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0) {
        /* interrupted: sleep the remainder */
    }
}

/* splitmix64: a good, cheap 64-bit mixer. */
static inline uint64_t test_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* A key naming one message: who sent it to whom, how long, and which one. */
static inline uint64_t test_key(int src, int dst, size_t len, int seq)
{
    uint64_t k = test_mix64((uint64_t)(uint32_t)src << 32 | (uint32_t)dst);
    k = test_mix64(k ^ (uint64_t)len);
    return test_mix64(k ^ (uint64_t)(uint32_t)seq);
}

/* Byte i of the pattern for key: byte (i % 8) of mix64(key + i / 8). */
static inline void pattern_fill(void *buf, size_t len, uint64_t key)
{
    unsigned char *p = (unsigned char *)buf;
    size_t words = len / 8, i;
    for (i = 0; i < words; i++) {
        uint64_t w = test_mix64(key + i);
        memcpy(p + 8 * i, &w, 8);
    }
    if (len % 8) {
        uint64_t w = test_mix64(key + words);
        memcpy(p + 8 * words, &w, len % 8);
    }
}

/* Returns the offset of the first byte that differs from the pattern, or -1 if all match. */
static inline long pattern_check(const void *buf, size_t len, uint64_t key)
{
    const unsigned char *p = (const unsigned char *)buf;
    size_t words = len / 8, i, j;
    for (i = 0; i < words; i++) {
        uint64_t w = test_mix64(key + i);
        if (memcmp(p + 8 * i, &w, 8) != 0) {
            unsigned char b[8];
            memcpy(b, &w, 8);
            for (j = 0; j < 8; j++)
                if (p[8 * i + j] != b[j])
                    return (long)(8 * i + j);
        }
    }
    if (len % 8) {
        uint64_t w = test_mix64(key + words);
        unsigned char b[8];
        memcpy(b, &w, 8);
        for (j = 0; j < len % 8; j++)
            if (p[8 * words + j] != b[j])
                return (long)(8 * words + j);
    }
    return -1;
}

/* The expected byte at offset off of the pattern (for messages about mismatches). */
static inline unsigned pattern_byte(uint64_t key, size_t off)
{
    uint64_t w = test_mix64(key + off / 8);
    unsigned char b[8];
    memcpy(b, &w, 8);
    return b[off % 8];
}

static inline void *test_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    CHECK(p != NULL, "malloc(%zu) failed", n);
    return p;
}

#endif
