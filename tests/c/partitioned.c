/*
 * partitioned.c - MPI-4 partitioned point-to-point (MPI_Psend_init, MPI_Precv_init, MPI_Pready,
 * MPI_Pready_range, MPI_Pready_list, MPI_Parrived), every payload checked.
 *
 * Every rank sends to the next rank of a ring and receives from the previous one.
 *   A. Sender 8 partitions of 6 ints, receiver 4 of 12: Pready in reverse order, the receiver
 *      polls MPI_Parrived and checks each partition as soon as it says it is in.
 *   B. Partitions go at MPI_Pready, not at MPI_Wait: the sender readies partition 0 only and
 *      waits for the receiver's acknowledgement (an ordinary message sent once MPI_Parrived(0)
 *      is true) before it readies the rest.
 *   C. Pready_range and Pready_list, sender 16 x 3 ints, receiver 3 x 16.
 *   D. 100 rounds of MPI_Startall / MPI_Waitall on one pair of requests, new data every round.
 *   E. A derived send datatype (a vector: 2 ints of every 3) into plain ints, and
 *      64 KiB partitions (above every eager limit).
 *   F. Two partitioned requests with the same peer and tag match in init order.
 *   G. MPI_PROC_NULL, and errors: a partition out of range, Pready twice, Pready on a receive.
 *   H. Empty partitions (count 0, mpi4py's testRing): MPI_Parrived is false until the sender
 *      has marked them ready, true after; three rounds; 1-3 partitions each side.
 */
#include "stormtest.h"

static int rank, size, next, prev;

static int val(int round, int src, int i)
{
    return round * 1000003 + src * 10007 + i;
}

static void section_a(void)
{
    enum { SP = 8, SC = 6, RP = 4, RC = 12, N = SP * SC };
    int sbuf[N], rbuf[N], seen[RP] = {0}, left = RP, i, p;
    MPI_Request s, r;
    for (i = 0; i < N; i++) {
        sbuf[i] = val(1, rank, i);
        rbuf[i] = -1;
    }
    CHECK_MPI(MPI_Precv_init(rbuf, RP, RC, MPI_INT, prev, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
    CHECK_MPI(MPI_Psend_init(sbuf, SP, SC, MPI_INT, next, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &s));
    CHECK_MPI(MPI_Start(&r));
    CHECK_MPI(MPI_Start(&s));
    for (p = SP - 1; p >= 0; p--)
        CHECK_MPI(MPI_Pready(p, s));
    while (left > 0) {
        for (p = 0; p < RP; p++) {
            int flag = 0;
            if (seen[p])
                continue;
            CHECK_MPI(MPI_Parrived(r, p, &flag));
            if (!flag)
                continue;
            for (i = p * RC; i < (p + 1) * RC; i++)
                CHECK(rbuf[i] == val(1, prev, i), "A: partition %d element %d is %d, not %d", p, i,
                      rbuf[i], val(1, prev, i));
            seen[p] = 1;
            left--;
        }
    }
    MPI_Status st;
    CHECK_MPI(MPI_Wait(&r, &st));
    CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 5, "A: status source %d tag %d", st.MPI_SOURCE,
          st.MPI_TAG);
    int count = -1;
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(count == N, "A: count %d, not %d", count, N);
    CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
    CHECK(r != MPI_REQUEST_NULL && s != MPI_REQUEST_NULL, "A: persistent requests went null");
    CHECK_MPI(MPI_Request_free(&r));
    CHECK_MPI(MPI_Request_free(&s));
    CHECK(r == MPI_REQUEST_NULL && s == MPI_REQUEST_NULL, "A: freed requests are not null");
}

static void section_b(void)
{
    enum { P = 4, C = 100, N = P * C };
    int sbuf[N], rbuf[N], i, flag = 0, ack = 0;
    MPI_Request s, r;
    for (i = 0; i < N; i++) {
        sbuf[i] = val(2, rank, i);
        rbuf[i] = -1;
    }
    CHECK_MPI(MPI_Psend_init(sbuf, P, C, MPI_INT, next, 6, MPI_COMM_WORLD, MPI_INFO_NULL, &s));
    CHECK_MPI(MPI_Precv_init(rbuf, P, C, MPI_INT, prev, 6, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
    MPI_Request both[2] = {s, r};
    CHECK_MPI(MPI_Startall(2, both));
    CHECK_MPI(MPI_Pready(0, s));
    /* The receive side: partition 0 must arrive before the sender readies anything else. */
    while (!flag)
        CHECK_MPI(MPI_Parrived(r, 0, &flag));
    for (i = 0; i < C; i++)
        CHECK(rbuf[i] == val(2, prev, i), "B: element %d is %d", i, rbuf[i]);
    CHECK_MPI(MPI_Parrived(r, P - 1, &flag));
    CHECK(!flag, "B: partition %d arrived before it was marked ready", P - 1);
    CHECK_MPI(MPI_Send(&ack, 1, MPI_INT, prev, 60, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Recv(&ack, 1, MPI_INT, next, 60, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (i = 1; i < P; i++)
        CHECK_MPI(MPI_Pready(i, s));
    CHECK_MPI(MPI_Waitall(2, both, MPI_STATUSES_IGNORE));
    for (i = 0; i < N; i++)
        CHECK(rbuf[i] == val(2, prev, i), "B: element %d is %d", i, rbuf[i]);
    CHECK_MPI(MPI_Request_free(&s));
    CHECK_MPI(MPI_Request_free(&r));
}

static void section_c(void)
{
    enum { SP = 16, SC = 3, RP = 3, RC = 16, N = 48 };
    int sbuf[N], rbuf[N], i, list[8];
    MPI_Request s, r;
    for (i = 0; i < N; i++) {
        sbuf[i] = val(3, rank, i);
        rbuf[i] = -1;
    }
    CHECK_MPI(MPI_Psend_init(sbuf, SP, SC, MPI_INT, next, 7, MPI_COMM_WORLD, MPI_INFO_NULL, &s));
    CHECK_MPI(MPI_Precv_init(rbuf, RP, RC, MPI_INT, prev, 7, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
    CHECK_MPI(MPI_Start(&s));
    CHECK_MPI(MPI_Start(&r));
    CHECK_MPI(MPI_Pready_range(8, 15, s));
    for (i = 0; i < 8; i++)
        list[i] = 7 - i;
    CHECK_MPI(MPI_Pready_list(8, list, s));
    int done = 0;
    MPI_Request both[2] = {s, r};
    while (!done)
        CHECK_MPI(MPI_Testall(2, both, &done, MPI_STATUSES_IGNORE));
    for (i = 0; i < N; i++)
        CHECK(rbuf[i] == val(3, prev, i), "C: element %d is %d", i, rbuf[i]);
    CHECK_MPI(MPI_Request_free(&s));
    CHECK_MPI(MPI_Request_free(&r));
}

static void section_d(void)
{
    enum { SP = 5, SC = 8, RP = 8, RC = 5, N = 40, ROUNDS = 100 };
    int sbuf[N], rbuf[N], i, round;
    MPI_Request req[2];
    CHECK_MPI(MPI_Psend_init(sbuf, SP, SC, MPI_INT, next, 8, MPI_COMM_WORLD, MPI_INFO_NULL,
                             &req[0]));
    CHECK_MPI(MPI_Precv_init(rbuf, RP, RC, MPI_INT, prev, 8, MPI_COMM_WORLD, MPI_INFO_NULL,
                             &req[1]));
    for (round = 0; round < ROUNDS; round++) {
        for (i = 0; i < N; i++) {
            sbuf[i] = val(100 + round, rank, i);
            rbuf[i] = -1;
        }
        CHECK_MPI(MPI_Startall(2, req));
        for (i = 0; i < SP; i++)
            CHECK_MPI(MPI_Pready((i * 3) % SP, req[0]));
        CHECK_MPI(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
        for (i = 0; i < N; i++)
            CHECK(rbuf[i] == val(100 + round, prev, i), "D: round %d element %d is %d", round, i,
                  rbuf[i]);
    }
    CHECK_MPI(MPI_Request_free(&req[0]));
    CHECK_MPI(MPI_Request_free(&req[1]));
}

static void section_e(void)
{
    /* 4 partitions of 8192 vector instances (2 ints each: 64 KiB of data per partition). */
    enum { P = 4, C = 8192, N = P * C * 2 };
    MPI_Datatype vec, two;
    int *sbuf = malloc(sizeof(int) * N / 2 * 3), *rbuf = malloc(sizeof(int) * N);
    MPI_Request s, r;
    long i;
    CHECK(sbuf && rbuf, "E: out of memory");
    CHECK_MPI(MPI_Type_vector(1, 2, 3, MPI_INT, &two));
    CHECK_MPI(MPI_Type_create_resized(two, 0, 3 * sizeof(int), &vec));
    CHECK_MPI(MPI_Type_commit(&vec));
    CHECK_MPI(MPI_Type_free(&two));
    for (i = 0; i < N / 2 * 3; i++)
        sbuf[i] = (i % 3 == 2) ? -7 : val(5, rank, (int)(i / 3 * 2 + i % 3));
    for (i = 0; i < N; i++)
        rbuf[i] = -1;
    CHECK_MPI(MPI_Psend_init(sbuf, P, C, vec, next, 9, MPI_COMM_WORLD, MPI_INFO_NULL, &s));
    /* The send type is freed while the request lives: the request keeps it. */
    CHECK_MPI(MPI_Type_free(&vec));
    CHECK_MPI(MPI_Precv_init(rbuf, 2, N / 2, MPI_INT, prev, 9, MPI_COMM_WORLD, MPI_INFO_NULL,
                             &r));
    CHECK_MPI(MPI_Start(&r));
    CHECK_MPI(MPI_Start(&s));
    CHECK_MPI(MPI_Pready_range(0, P - 1, s));
    CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (i = 0; i < N; i++)
        CHECK(rbuf[i] == val(5, prev, (int)i), "E: element %ld is %d", i, rbuf[i]);
    CHECK_MPI(MPI_Request_free(&s));
    CHECK_MPI(MPI_Request_free(&r));
    free(sbuf);
    free(rbuf);
}

static void section_f(void)
{
    int s1[4], s2[4], r1[4], r2[4], i;
    MPI_Request s[2], r[2];
    for (i = 0; i < 4; i++) {
        s1[i] = val(6, rank, i);
        s2[i] = val(7, rank, i);
    }
    CHECK_MPI(MPI_Psend_init(s1, 2, 2, MPI_INT, next, 11, MPI_COMM_WORLD, MPI_INFO_NULL, &s[0]));
    CHECK_MPI(MPI_Psend_init(s2, 4, 1, MPI_INT, next, 11, MPI_COMM_WORLD, MPI_INFO_NULL, &s[1]));
    CHECK_MPI(MPI_Precv_init(r1, 1, 4, MPI_INT, prev, 11, MPI_COMM_WORLD, MPI_INFO_NULL, &r[0]));
    CHECK_MPI(MPI_Precv_init(r2, 2, 2, MPI_INT, prev, 11, MPI_COMM_WORLD, MPI_INFO_NULL, &r[1]));
    /* Started in the other order: matching is by init order. */
    CHECK_MPI(MPI_Start(&r[1]));
    CHECK_MPI(MPI_Start(&r[0]));
    CHECK_MPI(MPI_Start(&s[1]));
    CHECK_MPI(MPI_Start(&s[0]));
    CHECK_MPI(MPI_Pready_range(0, 3, s[1]));
    CHECK_MPI(MPI_Pready_range(0, 1, s[0]));
    CHECK_MPI(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    CHECK_MPI(MPI_Waitall(2, s, MPI_STATUSES_IGNORE));
    for (i = 0; i < 4; i++) {
        CHECK(r1[i] == val(6, prev, i), "F: first request element %d is %d", i, r1[i]);
        CHECK(r2[i] == val(7, prev, i), "F: second request element %d is %d", i, r2[i]);
    }
    for (i = 0; i < 2; i++) {
        CHECK_MPI(MPI_Request_free(&s[i]));
        CHECK_MPI(MPI_Request_free(&r[i]));
    }
}

static void section_g(void)
{
    int buf[4] = {1, 2, 3, 4}, flag = 0, rc;
    MPI_Request s, r;
    CHECK_MPI(MPI_Psend_init(buf, 2, 2, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, MPI_INFO_NULL,
                             &s));
    CHECK_MPI(MPI_Precv_init(buf, 2, 2, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, MPI_INFO_NULL,
                             &r));
    CHECK_MPI(MPI_Start(&s));
    CHECK_MPI(MPI_Start(&r));
    CHECK_MPI(MPI_Parrived(r, 1, &flag));
    CHECK(flag, "G: a partition from MPI_PROC_NULL has not arrived");
    CHECK_MPI(MPI_Pready_range(0, 1, s));
    CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));

    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Start(&s));
    rc = MPI_Pready(2, s);
    CHECK(rc != MPI_SUCCESS, "G: MPI_Pready of partition 2 of 2 succeeded");
    CHECK_MPI(MPI_Pready(0, s));
    rc = MPI_Pready(0, s);
    CHECK(rc != MPI_SUCCESS, "G: MPI_Pready of one partition twice succeeded");
    CHECK_MPI(MPI_Pready(1, s));
    CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
    rc = MPI_Pready(0, s);
    CHECK(rc != MPI_SUCCESS, "G: MPI_Pready on an inactive request succeeded");
    CHECK_MPI(MPI_Start(&r));
    rc = MPI_Pready(0, r);
    CHECK(rc != MPI_SUCCESS, "G: MPI_Pready on a receive request succeeded");
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Request_free(&r));
    rc = MPI_Precv_init(buf, 2, 2, MPI_INT, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, MPI_INFO_NULL, &r);
    CHECK(rc != MPI_SUCCESS, "G: MPI_Precv_init from MPI_ANY_SOURCE succeeded");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    CHECK_MPI(MPI_Request_free(&s));
}

static void section_h(void)
{
    int sdummy = 0, rdummy = 0, flag;
    for (int p = 1; p <= 3; p++) {
        MPI_Request s, r;
        CHECK_MPI(MPI_Psend_init(&sdummy, p, 0, MPI_INT, next, 9, MPI_COMM_WORLD, MPI_INFO_NULL, &s));
        CHECK_MPI(MPI_Precv_init(&rdummy, p, 0, MPI_INT, prev, 9, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
        for (int round = 0; round < 3; round++) {
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            CHECK_MPI(MPI_Start(&r));
            for (int i = 0; i < p; i++) {
                CHECK_MPI(MPI_Parrived(r, i, &flag));
                CHECK(!flag, "empty partition %d of %d arrived before its sender started", i, p);
            }
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            CHECK_MPI(MPI_Start(&s));
            for (int i = 0; i < p; i++)
                CHECK_MPI(MPI_Pready(i, s));
            for (int i = 0; i < p; i++)
                do
                    CHECK_MPI(MPI_Parrived(r, i, &flag));
                while (!flag);
            CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
            CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
        }
        CHECK_MPI(MPI_Request_free(&s));
        CHECK_MPI(MPI_Request_free(&r));
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("partitioned");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    next = (rank + 1) % size;
    prev = (rank + size - 1) % size;
    section_a();
    section_b();
    section_c();
    section_d();
    section_e();
    section_f();
    section_g();
    section_h();
    return test_end();
}
