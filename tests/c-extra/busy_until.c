/*
 * busy_until.c - keeps a job communicating until a file appears, for tests that do something to
 * a running job from outside (connect to its ports, look at its sockets) and then let it finish.
 *
 * After MPI_Init every rank prints "READY <rank> <pid>" (flushed).  Then all ranks loop: a
 * Sendrecv of BYTES bytes around the ring (a pattern keyed by sender, receiver and iteration,
 * checked byte by byte, status checked) and an MPI_Bcast of rank 0's verdict whether FILE exists
 * yet.  When it does, every rank leaves the loop, rank 0 prints "iterations <n>", and the job
 * ends with "OK busy_until".  If FILE has not appeared after MAX_SECONDS, rank 0 fails the job.
 *
 * usage: busy_until FILE [bytes [max_seconds]]   (defaults: 65537 bytes, 30 s)
 */
#include "../c/stormtest.h"
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, size, left, right, verdict = 0;
    long bytes = 65537, max_seconds = 30, i;
    unsigned char *sbuf, *rbuf;
    double start;
    MPI_Status st;

    MPI_Init(&argc, &argv);
    test_begin("busy_until");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(argc > 1, "usage: busy_until FILE [bytes [max_seconds]]");
    if (argc > 2)
        bytes = atol(argv[2]);
    if (argc > 3)
        max_seconds = atol(argv[3]);
    CHECK(bytes >= 0 && bytes <= (1L << 28), "bad size %ld", bytes);
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    sbuf = malloc((size_t)bytes + 1);
    rbuf = malloc((size_t)bytes + 1);
    CHECK(sbuf && rbuf, "out of memory for %ld bytes", bytes);

    printf("READY %d %ld\n", rank, (long)getpid());
    fflush(stdout);

    start = MPI_Wtime();
    for (i = 0; verdict == 0; i++) {
        int count = -1;
        long off;
        pattern_fill(sbuf, (size_t)bytes, test_key(rank, right, (size_t)bytes, (int)i));
        CHECK_MPI(MPI_Sendrecv(sbuf, (int)bytes, MPI_BYTE, right, 5, rbuf, (int)bytes, MPI_BYTE,
                               left, 5, MPI_COMM_WORLD, &st));
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
        CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 5 && count == (int)bytes,
              "iteration %ld: status source %d tag %d count %d", i, st.MPI_SOURCE, st.MPI_TAG,
              count);
        off = pattern_check(rbuf, (size_t)bytes, test_key(left, rank, (size_t)bytes, (int)i));
        CHECK(off < 0, "iteration %ld: byte %ld from %d differs", i, off, left);
        if (rank == 0) {
            if (access(argv[1], F_OK) == 0)
                verdict = 1;
            else if (MPI_Wtime() - start > (double)max_seconds)
                verdict = 2;
        }
        CHECK_MPI(MPI_Bcast(&verdict, 1, MPI_INT, 0, MPI_COMM_WORLD));
    }
    CHECK(verdict == 1, "%s did not appear within %ld s", argv[1], max_seconds);
    if (rank == 0) {
        printf("iterations %ld\n", i);
        fflush(stdout);
    }
    free(sbuf);
    free(rbuf);
    return test_end();
}
