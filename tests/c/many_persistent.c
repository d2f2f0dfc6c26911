/*
 * many_persistent.c - more than 1024 buffered sends in flight and more than 1024 persistent
 * requests alive at once in every process.
 *
 * Every rank sends to its right neighbour and receives from its left one.
 *
 * 1. Buffered sends.  A buffer of exactly the size the standard asks for (each message's bytes
 *    plus MPI_BSEND_OVERHEAD) is attached, and 2N messages are sent with MPI_Bsend before the
 *    receiver posts anything (it waits in a barrier until all are sent): N "large" ones of 4104
 *    to 4152 bytes, past shared memory's eager limits, so none can have completed before its
 *    receive is posted, and between them N small ones of 0 to 48 bytes.  Then every message is
 *    received in order with its own tag and checked (count, every byte), and MPI_Buffer_detach
 *    gives back the attached address and size.
 * 2. Persistent requests.  4N are made and stay alive together: N MPI_Recv_init + N
 *    MPI_Send_init of 2 ints, N MPI_Bsend_init of a large message + N MPI_Recv_init for it.
 *    Their handles are distinct and not MPI_REQUEST_NULL.  In each of three rounds (new data
 *    each time) an exact buffer is attached, the N buffered sends are started (MPI_Startall)
 *    before the receiver starts anything (a barrier again, so N buffered sends are in flight
 *    at once), then the receives, then the small sends; everything is completed with
 *    MPI_Waitall, an MPI_Waitsome loop or an MPI_Testsome loop; every receive's status and
 *    payload is checked, every handle is still valid afterwards, and the buffer is detached.
 *    Finally the inactive requests complete at once with empty statuses and are freed.
 *
 * usage: many_persistent [--bsend-init-once] [N]     (N default 1500)
 *   --bsend-init-once  the MPI_Bsend_init requests are freed and made anew for each round, so
 *                      none is started twice (for Open MPI 4.1.4: see tests/c/README.md)
 */
#include "stormtest.h"

static int rank, size, left, right, n, bsend_init_once;

/* Sizes are multiples of 8, so an MPI that rounds parts of its buffer to 8 bytes still fits. */
static int large_len(int i) { return 4104 + 8 * (i % 7); }
static int small_len(int i) { return 8 * (i % 7); }

static int value(int src, int i, int round, int k) { return src * 1000003 + i * 7 + round * 100019 + k; }

/* Part 1: 2N buffered sends in flight, large and small interleaved (tag 2i large, 2i + 1 small). */
static void buffered_sends(void)
{
    int i, bsize = 0, dsize = -1, count = -1;
    unsigned char *msg = test_malloc(4200), *rbuf = test_malloc(4200);
    char *attached, *detached = NULL;
    MPI_Status st;

    for (i = 0; i < n; i++)
        bsize += large_len(i) + small_len(i) + 2 * MPI_BSEND_OVERHEAD;
    attached = test_malloc((size_t)bsize);
    CHECK_MPI(MPI_Buffer_attach(attached, bsize));
    for (i = 0; i < n; i++) {
        /* One source buffer for all: a buffered send has copied it when MPI_Bsend returns. */
        pattern_fill(msg, (size_t)large_len(i), test_key(rank, right, (size_t)large_len(i), 2 * i));
        CHECK_MPI(MPI_Bsend(msg, large_len(i), MPI_BYTE, right, 2 * i, MPI_COMM_WORLD));
        pattern_fill(msg, (size_t)small_len(i), test_key(rank, right, (size_t)small_len(i), 2 * i + 1));
        CHECK_MPI(MPI_Bsend(msg, small_len(i), MPI_BYTE, right, 2 * i + 1, MPI_COMM_WORLD));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (i = 0; i < 2 * n; i++) {
        int len = i % 2 ? small_len(i / 2) : large_len(i / 2);
        long off;
        CHECK_MPI(MPI_Recv(rbuf, 4200, MPI_BYTE, left, i, MPI_COMM_WORLD, &st));
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
        CHECK(st.MPI_SOURCE == left && st.MPI_TAG == i && count == len,
              "buffered message %d: source %d tag %d count %d, expected %d/%d/%d", i, st.MPI_SOURCE,
              st.MPI_TAG, count, left, i, len);
        off = pattern_check(rbuf, (size_t)count, test_key(left, rank, (size_t)count, i));
        CHECK(off < 0, "buffered message %d (%d B) wrong at byte %ld", i, count, off);
    }
    CHECK_MPI(MPI_Buffer_detach(&detached, &dsize));
    CHECK(detached == attached && dsize == bsize, "Buffer_detach gave %p/%d, attached %p/%d",
          (void *)detached, dsize, (void *)attached, bsize);
    free(attached);
    free(msg);
    free(rbuf);
}

static int cmp_req(const void *a, const void *b)
{
    MPI_Request x = *(const MPI_Request *)a, y = *(const MPI_Request *)b;
    return memcmp(&x, &y, sizeof x);
}

/* Part 2: requests [0, n) small receives, [n, 2n) small sends, [2n, 3n) buffered sends of the
 * large messages, [3n, 4n) their receives. */
static void persistent_requests(void)
{
    const int nreq = 4 * n;
    MPI_Request *reqs = test_malloc(sizeof(MPI_Request) * (size_t)nreq);
    MPI_Request *sorted = test_malloc(sizeof(MPI_Request) * (size_t)nreq);
    MPI_Status *stats = test_malloc(sizeof(MPI_Status) * (size_t)nreq);
    MPI_Status *got = test_malloc(sizeof(MPI_Status) * (size_t)nreq);
    int *indices = test_malloc(sizeof(int) * (size_t)nreq);
    int *seen = test_malloc(sizeof(int) * (size_t)nreq);
    int *ssmall = test_malloc(sizeof(int) * 2 * (size_t)n), *rsmall = test_malloc(sizeof(int) * 2 * (size_t)n);
    unsigned char **slarge = test_malloc(sizeof(unsigned char *) * (size_t)n);
    unsigned char **rlarge = test_malloc(sizeof(unsigned char *) * (size_t)n);
    int i, round, bsize = 0, dsize = -1, count;
    char *attached, *detached = NULL;

    for (i = 0; i < n; i++) {
        slarge[i] = test_malloc((size_t)large_len(i));
        rlarge[i] = test_malloc((size_t)large_len(i));
        bsize += large_len(i) + MPI_BSEND_OVERHEAD;
        CHECK_MPI(MPI_Recv_init(&rsmall[2 * i], 2, MPI_INT, left, i, MPI_COMM_WORLD, &reqs[i]));
        CHECK_MPI(MPI_Send_init(&ssmall[2 * i], 2, MPI_INT, right, i, MPI_COMM_WORLD, &reqs[n + i]));
        CHECK_MPI(MPI_Bsend_init(slarge[i], large_len(i), MPI_BYTE, right, n + i, MPI_COMM_WORLD,
                                 &reqs[2 * n + i]));
        CHECK_MPI(MPI_Recv_init(rlarge[i], large_len(i), MPI_BYTE, left, n + i, MPI_COMM_WORLD,
                                &reqs[3 * n + i]));
    }
    memcpy(sorted, reqs, sizeof(MPI_Request) * (size_t)nreq);
    qsort(sorted, (size_t)nreq, sizeof(MPI_Request), cmp_req);
    for (i = 0; i < nreq; i++) {
        CHECK(sorted[i] != MPI_REQUEST_NULL, "a persistent request is MPI_REQUEST_NULL");
        CHECK(i == 0 || cmp_req(&sorted[i - 1], &sorted[i]) != 0,
              "two of the %d persistent requests have the same handle", nreq);
    }
    attached = test_malloc((size_t)bsize);

    for (round = 0; round < 3; round++) {
        for (i = 0; i < n; i++) {
            ssmall[2 * i] = value(rank, i, round, 0);
            ssmall[2 * i + 1] = value(rank, i, round, 1);
            rsmall[2 * i] = rsmall[2 * i + 1] = -1;
            pattern_fill(slarge[i], (size_t)large_len(i), test_key(rank, right, (size_t)large_len(i), round * n + i));
            memset(rlarge[i], 0xEE, (size_t)large_len(i));
        }
        if (bsend_init_once && round > 0) {
            for (i = 0; i < n; i++) {
                CHECK_MPI(MPI_Request_free(&reqs[2 * n + i]));
                CHECK_MPI(MPI_Bsend_init(slarge[i], large_len(i), MPI_BYTE, right, n + i,
                                         MPI_COMM_WORLD, &reqs[2 * n + i]));
            }
        }
        CHECK_MPI(MPI_Buffer_attach(attached, bsize));
        /* N buffered sends in flight before anyone receives */
        CHECK_MPI(MPI_Startall(n, &reqs[2 * n]));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_Startall(n, &reqs[3 * n]));
        CHECK_MPI(MPI_Startall(n, &reqs[0]));
        if (round == 1) {
            for (i = n; i < 2 * n; i++)
                CHECK_MPI(MPI_Start(&reqs[i]));
        } else {
            CHECK_MPI(MPI_Startall(n, &reqs[n]));
        }

        if (round == 0) {
            CHECK_MPI(MPI_Waitall(nreq, reqs, stats));
        } else {
            int done = 0, outcount, k;
            memset(seen, 0, sizeof(int) * (size_t)nreq);
            while (done < nreq) {
                if (round == 1)
                    CHECK_MPI(MPI_Waitsome(nreq, reqs, &outcount, indices, got));
                else
                    CHECK_MPI(MPI_Testsome(nreq, reqs, &outcount, indices, got));
                /* Completed persistent requests are inactive, not null: never reported again,
                 * and MPI_UNDEFINED would mean that none was active any more. */
                CHECK(outcount != MPI_UNDEFINED, "round %d: %s found no active request after "
                      "%d of %d completed", round, round == 1 ? "Waitsome" : "Testsome", done, nreq);
                for (k = 0; k < outcount; k++) {
                    int idx = indices[k];
                    CHECK(idx >= 0 && idx < nreq && !seen[idx], "round %d: index %d reported "
                          "twice or out of range", round, idx);
                    seen[idx] = 1;
                    stats[idx] = got[k];
                }
                done += outcount;
                if (outcount == 0)
                    test_sleep_ms(1);
            }
        }
        for (i = 0; i < nreq; i++)
            CHECK(reqs[i] != MPI_REQUEST_NULL, "round %d: persistent request %d became "
                  "MPI_REQUEST_NULL on completion", round, i);
        for (i = 0; i < n; i++) {
            long off;
            const MPI_Status *s = &stats[i], *l = &stats[3 * n + i];
            CHECK_MPI(MPI_Get_count(s, MPI_INT, &count));
            CHECK(s->MPI_SOURCE == left && s->MPI_TAG == i && count == 2,
                  "round %d: small receive %d: source %d tag %d count %d", round, i,
                  s->MPI_SOURCE, s->MPI_TAG, count);
            CHECK_MPI(MPI_Get_count(l, MPI_BYTE, &count));
            CHECK(l->MPI_SOURCE == left && l->MPI_TAG == n + i && count == large_len(i),
                  "round %d: large receive %d: source %d tag %d count %d", round, i,
                  l->MPI_SOURCE, l->MPI_TAG, count);
            CHECK(rsmall[2 * i] == value(left, i, round, 0) && rsmall[2 * i + 1] == value(left, i, round, 1),
                  "round %d: small message %d is %d,%d, expected %d,%d", round, i, rsmall[2 * i],
                  rsmall[2 * i + 1], value(left, i, round, 0), value(left, i, round, 1));
            off = pattern_check(rlarge[i], (size_t)large_len(i), test_key(left, rank, (size_t)large_len(i), round * n + i));
            CHECK(off < 0, "round %d: large message %d (%d B) wrong at byte %ld", round, i,
                  large_len(i), off);
        }
        CHECK_MPI(MPI_Buffer_detach(&detached, &dsize));
        CHECK(detached == attached && dsize == bsize, "round %d: Buffer_detach gave %p/%d",
              round, (void *)detached, dsize);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }

    /* all inactive: complete at once with empty statuses; then freed */
    CHECK_MPI(MPI_Waitall(nreq, reqs, stats));
    for (i = 0; i < nreq; i++) {
        count = -1;
        CHECK_MPI(MPI_Get_count(&stats[i], MPI_INT, &count));
        CHECK(stats[i].MPI_SOURCE == MPI_ANY_SOURCE && stats[i].MPI_TAG == MPI_ANY_TAG && count == 0,
              "inactive request %d: status source %d tag %d count %d, expected the empty status",
              i, stats[i].MPI_SOURCE, stats[i].MPI_TAG, count);
        CHECK_MPI(MPI_Request_free(&reqs[i]));
        CHECK(reqs[i] == MPI_REQUEST_NULL, "Request_free left request %d non-null", i);
    }
    for (i = 0; i < n; i++) {
        free(slarge[i]);
        free(rlarge[i]);
    }
    free(attached);
    free(slarge);
    free(rlarge);
    free(ssmall);
    free(rsmall);
    free(reqs);
    free(sorted);
    free(stats);
    free(got);
    free(indices);
    free(seen);
}

int main(int argc, char **argv)
{
    int i;

    MPI_Init(&argc, &argv);
    test_begin("many_persistent");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    n = 1500;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--bsend-init-once") == 0)
            bsend_init_once = 1;
        else
            n = atoi(argv[i]);
    }
    CHECK(n > 0 && n <= 8000, "N must be in 1..8000 (tags up to 2N must stay below 32767)");

    buffered_sends();
    persistent_requests();
    return test_end();
}
