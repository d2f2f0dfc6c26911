/*
 * stormthread.h - helpers shared by the multi-threaded test programs (tests/c/threads_*.c).
 *
 * Include it instead of stormtest.h (it includes that).  It gives:
 *   test_init_multiple(&argc, &argv, name)
 *                          MPI_Init_thread(MPI_THREAD_MULTIPLE) + test_begin; FAILs unless the
 *                          library provides MPI_THREAD_MULTIPLE (and MPI_Query_thread agrees)
 *   test_run_threads(n, fn, args, stride)
 *                          start n POSIX threads, thread i runs fn((char *)args + i * stride),
 *                          and join them all
 *   test_thread_level_name(level)   "MPI_THREAD_SINGLE", ... for messages
 *
 * The programs are C99 + POSIX threads: build with -pthread.  Threads of one rank coordinate
 * with mutexes, condition variables and barriers (blocking, never spinning); a loop that waits
 * for MPI calls MPI in every iteration and yields the processor (sched_yield), so that the
 * programs stay quick when the ranks' threads outnumber the cores.
 */
#ifndef STORMTHREAD_H
#define STORMTHREAD_H

#include "stormtest.h"

#include <pthread.h>
#include <sched.h>

static inline const char *test_thread_level_name(int level)
{
    if (level == MPI_THREAD_SINGLE)
        return "MPI_THREAD_SINGLE";
    if (level == MPI_THREAD_FUNNELED)
        return "MPI_THREAD_FUNNELED";
    if (level == MPI_THREAD_SERIALIZED)
        return "MPI_THREAD_SERIALIZED";
    if (level == MPI_THREAD_MULTIPLE)
        return "MPI_THREAD_MULTIPLE";
    return "an unknown level";
}

/* Call instead of MPI_Init and test_begin. */
static inline void test_init_multiple(int *argc, char ***argv, const char *name)
{
    int provided = -1, queried = -1, rc;
    stormtest_name = name;
    rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "FAIL %s: MPI_Init_thread(MPI_THREAD_MULTIPLE) returned %d (%s:%d)\n",
                name, rc, __FILE__, __LINE__);
        exit(1);
    }
    test_begin(name);
    CHECK(provided == MPI_THREAD_MULTIPLE,
          "MPI_Init_thread(MPI_THREAD_MULTIPLE) provided %s (%d); this test needs "
          "MPI_THREAD_MULTIPLE",
          test_thread_level_name(provided), provided);
    CHECK_MPI(MPI_Query_thread(&queried));
    CHECK(queried == provided, "MPI_Query_thread says %s (%d), MPI_Init_thread provided %d",
          test_thread_level_name(queried), queried, provided);
}

/* Runs n threads; thread i gets (char *)args + i * stride.  Returns when all have ended. */
static inline void test_run_threads(int n, void *(*fn)(void *), void *args, size_t stride)
{
    pthread_t *tids = (pthread_t *)test_malloc(sizeof(pthread_t) * (size_t)n);
    int i, rc;
    for (i = 0; i < n; i++) {
        rc = pthread_create(&tids[i], NULL, fn, (char *)args + (size_t)i * stride);
        CHECK(rc == 0, "pthread_create of thread %d failed (%d)", i, rc);
    }
    for (i = 0; i < n; i++) {
        rc = pthread_join(tids[i], NULL);
        CHECK(rc == 0, "pthread_join of thread %d failed (%d)", i, rc);
    }
    free(tids);
}

#endif
