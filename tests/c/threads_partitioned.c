/*
 * threads_partitioned.c - partitioned communication's main use: one thread per partition
 * fills its part of the send buffer and marks it ready (MPI_Pready) while other threads of the
 * receiving rank wait for their partitions (MPI_Parrived), under MPI_THREAD_MULTIPLE.
 *
 * Every rank sends to the next rank of a ring and receives from the previous one, with 4
 * threads and 4 send partitions of 1000 ints, into 2 receive partitions of 2000 ints.  Each
 * round (50 in all) the main thread starts both requests; thread k fills and readies send
 * partition k, then threads 0 and 1 each poll MPI_Parrived for receive partition k and check
 * it; the main thread then waits for both requests and checks the whole buffer again.
 */
#include "stormthread.h"

#include <pthread.h>

enum { NT = 4, SC = 1000, RP = 2, RC = 2000, N = NT * SC, ROUNDS = 50 };

static int rank, size, next, prev, round_no;
static int sbuf[N], rbuf[N];
static MPI_Request sreq, rreq;
static pthread_barrier_t started, finished;

static int val(int round, int src, int i)
{
    return round * 1000003 + src * 10007 + i;
}

static void *worker(void *arg)
{
    int k = *(int *)arg, r, i;
    for (r = 0; r < ROUNDS; r++) {
        pthread_barrier_wait(&started);
        for (i = k * SC; i < (k + 1) * SC; i++)
            sbuf[i] = val(round_no, rank, i);
        CHECK_MPI(MPI_Pready(k, sreq));
        if (k < RP) {
            int flag = 0;
            while (!flag) {
                CHECK_MPI(MPI_Parrived(rreq, k, &flag));
                if (!flag)
                    sched_yield();
            }
            for (i = k * RC; i < (k + 1) * RC; i++)
                CHECK(rbuf[i] == val(round_no, prev, i),
                      "round %d: thread %d: element %d is %d, not %d", round_no, k, i, rbuf[i],
                      val(round_no, prev, i));
        }
        pthread_barrier_wait(&finished);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int ids[NT], i, r;
    test_init_multiple(&argc, &argv, "threads_partitioned");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    next = (rank + 1) % size;
    prev = (rank + size - 1) % size;
    CHECK_MPI(MPI_Psend_init(sbuf, NT, SC, MPI_INT, next, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &sreq));
    CHECK_MPI(MPI_Precv_init(rbuf, RP, RC, MPI_INT, prev, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &rreq));
    pthread_barrier_init(&started, NULL, NT + 1);
    pthread_barrier_init(&finished, NULL, NT + 1);
    pthread_t tids[NT];
    for (i = 0; i < NT; i++) {
        ids[i] = i;
        CHECK(pthread_create(&tids[i], NULL, worker, &ids[i]) == 0, "pthread_create failed");
    }
    for (r = 0; r < ROUNDS; r++) {
        round_no = r;
        for (i = 0; i < N; i++)
            rbuf[i] = -1;
        CHECK_MPI(MPI_Start(&rreq));
        CHECK_MPI(MPI_Start(&sreq));
        pthread_barrier_wait(&started);
        pthread_barrier_wait(&finished);
        CHECK_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Wait(&rreq, MPI_STATUS_IGNORE));
        for (i = 0; i < N; i++)
            CHECK(rbuf[i] == val(r, prev, i), "round %d: element %d is %d", r, i, rbuf[i]);
    }
    for (i = 0; i < NT; i++)
        pthread_join(tids[i], NULL);
    CHECK_MPI(MPI_Request_free(&sreq));
    CHECK_MPI(MPI_Request_free(&rreq));
    return test_end();
}
