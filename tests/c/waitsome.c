/*
 * waitsome.c - the multiple-completion calls: MPI_Waitany, MPI_Testany, MPI_Waitsome,
 * MPI_Testsome, MPI_Testall, MPI_Waitall over arrays that mix completed and pending requests
 * and MPI_REQUEST_NULL entries, with completion in an order different from posting order.
 *
 * Ranks pair up (0,1), (2,3)...; the even rank (R) drives, the odd rank (S) only sends a data
 * message with tag t when R asks for it with a command message, so R knows exactly which
 * requests can have completed at any time and checks that the calls report exactly those:
 *   - all-null arrays: Waitany/Testany give MPI_UNDEFINED, Waitsome/Testsome outcount
 *     MPI_UNDEFINED, Testall flag true;
 *   - Waitany/Testany: 8 receives (tags 0..7) spread over a 12-entry array with null holes;
 *     tags requested in a scrambled order; Testany must say "none" before each request and
 *     Waitany must return the index of the one requested tag;
 *   - Waitsome/Testsome: 3 tags requested, Waitsome returns exactly those indices; Testsome then
 *     returns 0; the rest are collected with Testsome;
 *   - Testall returns false while half are still pending and must not free any request; later
 *     true with every status right and empty statuses for the null entries;
 *   - Waitsome over a mix of a 1 MiB Isend and Irecvs.
 * Some messages are 400 KB so that rendezvous and eager completions are mixed.
 * Then both ranks of a pair: small Isends (which an MPI may complete as they start, all under
 * one shared handle) completed by each call in turn — Wait, Test, Request_free, Waitany,
 * Testany, Waitsome, Testsome, Testall, Waitall, mixed with null entries and a pending receive —
 * every handle ends as MPI_REQUEST_NULL and the peer receives every message intact.
 */
#include "stormtest.h"

#define NT 8      /* data tags 0..NT-1 */
#define NPOS 12   /* array length, with null holes */
#define BIGN 100000
#define TAG_CMD 1000
#define CMD_STOP -1
#define CMD_RECV_BIG -2
#define TAG_BIG 500

static const int pos[NT] = {0, 2, 3, 5, 6, 8, 9, 11}; /* holes at 1, 4, 7, 10 */
static int rank, peer;
static int *rbuf[NT];

static int msg_len(int tag) { return tag % 3 == 2 ? BIGN : 50; }
static int msg_val(int phase, int tag, int i) { return (phase * 100 + tag) * 100003 + i; }

static void command(int cmd)
{
    CHECK_MPI(MPI_Send(&cmd, 1, MPI_INT, peer, TAG_CMD, MPI_COMM_WORLD));
}

static void ask(int phase, int tag) { command(phase * 1000 + tag); }

static void post_all(MPI_Request *reqs)
{
    int t;
    for (t = 0; t < NPOS; t++)
        reqs[t] = MPI_REQUEST_NULL;
    for (t = 0; t < NT; t++)
        CHECK_MPI(MPI_Irecv(rbuf[t], BIGN, MPI_INT, peer, t, MPI_COMM_WORLD, &reqs[pos[t]]));
}

static int tag_at(int index)
{
    int t;
    for (t = 0; t < NT; t++)
        if (pos[t] == index)
            return t;
    return -1;
}

static void check_recv(int phase, int index, const MPI_Status *st, const char *call)
{
    int t = tag_at(index), count = -1, i;
    CHECK(t >= 0, "phase %d: %s reported index %d, which holds MPI_REQUEST_NULL", phase, call, index);
    CHECK(st->MPI_SOURCE == peer && st->MPI_TAG == t, "phase %d: %s index %d: status source %d "
          "tag %d, expected %d/%d", phase, call, index, st->MPI_SOURCE, st->MPI_TAG, peer, t);
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &count));
    CHECK(count == msg_len(t), "phase %d: tag %d: count %d", phase, t, count);
    for (i = 0; i < count; i++)
        CHECK(rbuf[t][i] == msg_val(phase, t, i), "phase %d: tag %d: element %d is %d", phase, t,
              i, rbuf[t][i]);
}

static void check_empty(const MPI_Status *st, const char *what)
{
    CHECK(st->MPI_SOURCE == MPI_ANY_SOURCE && st->MPI_TAG == MPI_ANY_TAG,
          "%s: status of a MPI_REQUEST_NULL entry is source %d tag %d, not empty", what,
          st->MPI_SOURCE, st->MPI_TAG);
}

static void null_arrays(void)
{
    MPI_Request reqs[4] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status st, stats[4];
    int index = 0, flag = 0, outcount = 0, indices[4];

    CHECK_MPI(MPI_Waitany(4, reqs, &index, &st));
    CHECK(index == MPI_UNDEFINED, "Waitany on all-null array: index %d", index);
    CHECK_MPI(MPI_Waitany(0, reqs, &index, &st));
    CHECK(index == MPI_UNDEFINED, "Waitany on empty array: index %d", index);
    index = 0;
    CHECK_MPI(MPI_Testany(4, reqs, &index, &flag, &st));
    CHECK(flag && index == MPI_UNDEFINED, "Testany on all-null array: flag %d index %d", flag, index);
    CHECK_MPI(MPI_Waitsome(4, reqs, &outcount, indices, stats));
    CHECK(outcount == MPI_UNDEFINED, "Waitsome on all-null array: outcount %d", outcount);
    outcount = 0;
    CHECK_MPI(MPI_Testsome(4, reqs, &outcount, indices, stats));
    CHECK(outcount == MPI_UNDEFINED, "Testsome on all-null array: outcount %d", outcount);
    flag = 0;
    CHECK_MPI(MPI_Testall(4, reqs, &flag, stats));
    CHECK(flag, "Testall on all-null array: flag false");
    CHECK_MPI(MPI_Waitall(4, reqs, stats));
    check_empty(&stats[2], "Waitall on all-null array");
}

static void driver(void)
{
    static const int order[NT] = {5, 2, 7, 0, 3, 6, 1, 4};
    MPI_Request reqs[NPOS];
    MPI_Status st, stats[NPOS];
    int index, flag, outcount, indices[NPOS], j, t, seen[NPOS], got;
    double t0;

    /* Phase 1: Waitany / Testany */
    post_all(reqs);
    for (j = 0; j < NT; j++) {
        index = -5;
        flag = 1;
        CHECK_MPI(MPI_Testany(NPOS, reqs, &index, &flag, &st));
        CHECK(!flag && index == MPI_UNDEFINED, "phase 1: Testany before any message was requested: "
              "flag %d index %d", flag, index);
        ask(1, order[j]);
        CHECK_MPI(MPI_Waitany(NPOS, reqs, &index, &st));
        CHECK(index == pos[order[j]], "phase 1: Waitany returned index %d, expected %d (tag %d)",
              index, pos[order[j]], order[j]);
        check_recv(1, index, &st, "Waitany");
        CHECK(reqs[index] == MPI_REQUEST_NULL, "phase 1: Waitany did not free request %d", index);
    }
    CHECK_MPI(MPI_Waitany(NPOS, reqs, &index, &st));
    CHECK(index == MPI_UNDEFINED, "phase 1: final Waitany index %d", index);

    /* Phase 2: Waitsome / Testsome */
    post_all(reqs);
    CHECK_MPI(MPI_Testsome(NPOS, reqs, &outcount, indices, stats));
    CHECK(outcount == 0, "phase 2: Testsome with nothing sent: outcount %d", outcount);
    ask(2, 6);
    ask(2, 1);
    ask(2, 3);
    memset(seen, 0, sizeof seen);
    for (got = 0; got < 3;) {
        CHECK_MPI(MPI_Waitsome(NPOS, reqs, &outcount, indices, stats));
        CHECK(outcount >= 1 && outcount <= 3 - got, "phase 2: Waitsome outcount %d after %d of 3",
              outcount, got);
        for (j = 0; j < outcount; j++) {
            t = tag_at(indices[j]);
            CHECK(t == 6 || t == 1 || t == 3, "phase 2: Waitsome reported index %d (tag %d), "
                  "which was not sent", indices[j], t);
            CHECK(!seen[indices[j]], "phase 2: index %d reported twice", indices[j]);
            seen[indices[j]] = 1;
            check_recv(2, indices[j], &stats[j], "Waitsome");
        }
        got += outcount;
    }
    CHECK_MPI(MPI_Testsome(NPOS, reqs, &outcount, indices, stats));
    CHECK(outcount == 0, "phase 2: Testsome after the 3 requested: outcount %d", outcount);
    ask(2, 7);
    ask(2, 0);
    ask(2, 5);
    ask(2, 2);
    ask(2, 4);
    t0 = MPI_Wtime();
    for (got = 0; got < 5;) {
        CHECK_MPI(MPI_Testsome(NPOS, reqs, &outcount, indices, stats));
        CHECK(outcount >= 0 && outcount <= 5 - got, "phase 2: Testsome outcount %d", outcount);
        for (j = 0; j < outcount; j++) {
            CHECK(!seen[indices[j]], "phase 2: index %d reported twice", indices[j]);
            seen[indices[j]] = 1;
            check_recv(2, indices[j], &stats[j], "Testsome");
        }
        got += outcount;
        if (outcount == 0) {
            CHECK(MPI_Wtime() - t0 < 20.0, "phase 2: Testsome never completed the last %d", 5 - got);
            test_sleep_ms(1);
        }
    }
    CHECK_MPI(MPI_Testsome(NPOS, reqs, &outcount, indices, stats));
    CHECK(outcount == MPI_UNDEFINED, "phase 2: Testsome on the all-null array: %d", outcount);

    /* Phase 3: Testall with half pending */
    post_all(reqs);
    for (t = 0; t < NT / 2; t++)
        ask(3, t);
    for (j = 0; j < 20; j++) {
        flag = 1;
        CHECK_MPI(MPI_Testall(NPOS, reqs, &flag, stats));
        CHECK(!flag, "phase 3: Testall true while tags 4..7 were never sent");
        for (t = 0; t < NT; t++)
            CHECK(reqs[pos[t]] != MPI_REQUEST_NULL, "phase 3: Testall returned false but freed "
                  "request %d", pos[t]);
        test_sleep_ms(1);
    }
    for (t = NT / 2; t < NT; t++)
        ask(3, t);
    t0 = MPI_Wtime();
    do {
        CHECK_MPI(MPI_Testall(NPOS, reqs, &flag, stats));
        if (!flag) {
            CHECK(MPI_Wtime() - t0 < 20.0, "phase 3: Testall never became true");
            test_sleep_ms(1);
        }
    } while (!flag);
    for (j = 0; j < NPOS; j++) {
        CHECK(reqs[j] == MPI_REQUEST_NULL, "phase 3: Testall true but request %d not freed", j);
        if (tag_at(j) >= 0)
            check_recv(3, j, &stats[j], "Testall");
        else
            check_empty(&stats[j], "phase 3 Testall");
    }

    /* Phase 4: Waitsome over a send and receives */
    {
        int *big = test_malloc(sizeof(int) * (1 << 18)), i, done = 0;
        for (i = 0; i < 1 << 18; i++)
            big[i] = i ^ 0x5a5a;
        for (j = 0; j < 4; j++)
            reqs[j] = MPI_REQUEST_NULL;
        CHECK_MPI(MPI_Isend(big, 1 << 18, MPI_INT, peer, TAG_BIG, MPI_COMM_WORLD, &reqs[0]));
        CHECK_MPI(MPI_Irecv(rbuf[0], BIGN, MPI_INT, peer, 0, MPI_COMM_WORLD, &reqs[1]));
        CHECK_MPI(MPI_Irecv(rbuf[1], BIGN, MPI_INT, peer, 1, MPI_COMM_WORLD, &reqs[3]));
        ask(4, 1);
        command(CMD_RECV_BIG);
        ask(4, 0);
        memset(seen, 0, sizeof seen);
        while (done < 3) {
            CHECK_MPI(MPI_Waitsome(4, reqs, &outcount, indices, stats));
            CHECK(outcount >= 1 && outcount <= 3 - done, "phase 4: Waitsome outcount %d", outcount);
            for (j = 0; j < outcount; j++) {
                int ix = indices[j];
                CHECK(ix == 0 || ix == 1 || ix == 3, "phase 4: Waitsome index %d", ix);
                CHECK(!seen[ix], "phase 4: index %d reported twice", ix);
                seen[ix] = 1;
                if (ix != 0) {
                    int tt = ix == 1 ? 0 : 1, count = -1;
                    CHECK(stats[j].MPI_TAG == tt && stats[j].MPI_SOURCE == peer,
                          "phase 4: index %d status tag %d source %d", ix, stats[j].MPI_TAG,
                          stats[j].MPI_SOURCE);
                    CHECK_MPI(MPI_Get_count(&stats[j], MPI_INT, &count));
                    CHECK(count == msg_len(tt) && rbuf[tt][count - 1] == msg_val(4, tt, count - 1),
                          "phase 4: tag %d: count %d or data wrong", tt, count);
                }
            }
            done += outcount;
        }
        free(big);
    }
    command(CMD_STOP);
}

static void sender(void)
{
    int *buf = test_malloc(sizeof(int) * BIGN), cmd, i;
    MPI_Status st;
    for (;;) {
        CHECK_MPI(MPI_Recv(&cmd, 1, MPI_INT, peer, TAG_CMD, MPI_COMM_WORLD, &st));
        if (cmd == CMD_STOP)
            break;
        if (cmd == CMD_RECV_BIG) {
            int *big = test_malloc(sizeof(int) * (1 << 18));
            CHECK_MPI(MPI_Recv(big, 1 << 18, MPI_INT, peer, TAG_BIG, MPI_COMM_WORLD, &st));
            for (i = 0; i < 1 << 18; i++)
                CHECK(big[i] == (i ^ 0x5a5a), "phase 4: big message element %d is %d", i, big[i]);
            free(big);
            continue;
        }
        {
            int phase = cmd / 1000, tag = cmd % 1000, n = msg_len(tag);
            for (i = 0; i < n; i++)
                buf[i] = msg_val(phase, tag, i);
            CHECK_MPI(MPI_Send(buf, n, MPI_INT, peer, tag, MPI_COMM_WORLD));
        }
    }
    free(buf);
}

#define NSMALL 9
#define TAG_SMALL 700

/* Small sends completed by every completion call; the peer checks what arrives. */
static void small_sends(void)
{
    MPI_Request r[4], rr;
    MPI_Status st[4];
    int v[NSMALL], got[NSMALL], i, t, idx, flag, out, outs[4], k = 0;

    for (i = 0; i < NSMALL; i++)
        v[i] = 31000 + 100 * rank + i;
    /* Wait */
    CHECK_MPI(MPI_Isend(&v[k], 1, MPI_INT, peer, TAG_SMALL + k, MPI_COMM_WORLD, &r[0]));
    CHECK(r[0] != MPI_REQUEST_NULL, "Isend returned MPI_REQUEST_NULL");
    CHECK_MPI(MPI_Wait(&r[0], &st[0]));
    CHECK(r[0] == MPI_REQUEST_NULL, "Wait left a send's handle");
    k++;
    /* Test until done */
    CHECK_MPI(MPI_Isend(&v[k], 1, MPI_INT, peer, TAG_SMALL + k, MPI_COMM_WORLD, &r[0]));
    for (flag = 0, i = 0; !flag; i++) {
        CHECK(i < 100000, "Test never completed a small send");
        CHECK_MPI(MPI_Test(&r[0], &flag, &st[0]));
    }
    CHECK(r[0] == MPI_REQUEST_NULL, "Test left a send's handle");
    k++;
    /* Request_free */
    CHECK_MPI(MPI_Isend(&v[k], 1, MPI_INT, peer, TAG_SMALL + k, MPI_COMM_WORLD, &r[0]));
    CHECK_MPI(MPI_Request_free(&r[0]));
    CHECK(r[0] == MPI_REQUEST_NULL, "Request_free left a send's handle");
    k++;
    /* Waitany and Testany over null, two sends and a receive the peer satisfies only near its
     * end (it may be ahead, so the receive may complete in any of the calls below) */
    CHECK_MPI(MPI_Irecv(&got[0], 1, MPI_INT, peer, TAG_SMALL + NSMALL, MPI_COMM_WORLD, &rr));
    r[0] = MPI_REQUEST_NULL;
    r[1] = rr;
    CHECK_MPI(MPI_Isend(&v[k], 1, MPI_INT, peer, TAG_SMALL + k, MPI_COMM_WORLD, &r[2]));
    k++;
    CHECK_MPI(MPI_Isend(&v[k], 1, MPI_INT, peer, TAG_SMALL + k, MPI_COMM_WORLD, &r[3]));
    k++;
    CHECK(r[2] != MPI_REQUEST_NULL && r[3] != MPI_REQUEST_NULL, "Isend returned MPI_REQUEST_NULL");
    CHECK_MPI(MPI_Waitany(4, r, &idx, &st[0]));
    CHECK(idx >= 1 && idx <= 3 && r[idx] == MPI_REQUEST_NULL, "Waitany: index %d", idx);
    for (i = 0; r[2] != MPI_REQUEST_NULL || r[3] != MPI_REQUEST_NULL; i++) {
        CHECK(i < 100000, "Testany never completed the sends");
        CHECK_MPI(MPI_Testany(4, r, &idx, &flag, &st[0]));
        if (flag)
            CHECK(idx >= 1 && idx <= 3 && r[idx] == MPI_REQUEST_NULL, "Testany: index %d", idx);
    }
    /* Waitsome and Testsome */
    CHECK_MPI(MPI_Isend(&v[k], 1, MPI_INT, peer, TAG_SMALL + k, MPI_COMM_WORLD, &r[2]));
    k++;
    while (r[2] != MPI_REQUEST_NULL) {
        CHECK_MPI(MPI_Waitsome(4, r, &out, outs, st));
        CHECK(out >= 1 && out <= 2, "Waitsome: outcount %d", out);
        for (i = 0; i < out; i++)
            CHECK((outs[i] == 1 || outs[i] == 2) && r[outs[i]] == MPI_REQUEST_NULL,
                  "Waitsome: index %d", outs[i]);
    }
    CHECK_MPI(MPI_Isend(&v[k], 1, MPI_INT, peer, TAG_SMALL + k, MPI_COMM_WORLD, &r[3]));
    k++;
    for (i = 0; r[3] != MPI_REQUEST_NULL; i++) {
        CHECK(i < 100000, "Testsome never completed a small send");
        CHECK_MPI(MPI_Testsome(4, r, &out, outs, st));
        for (t = 0; t < out; t++)
            CHECK((outs[t] == 1 || outs[t] == 3) && r[outs[t]] == MPI_REQUEST_NULL,
                  "Testsome: index %d", outs[t]);
    }
    /* Testall, then Waitall with the receive, which the peer's last send satisfies */
    CHECK_MPI(MPI_Isend(&v[k], 1, MPI_INT, peer, TAG_SMALL + k, MPI_COMM_WORLD, &r[2]));
    k++;
    CHECK_MPI(MPI_Isend(&v[k], 1, MPI_INT, peer, TAG_SMALL + NSMALL, MPI_COMM_WORLD, &r[3]));
    CHECK_MPI(MPI_Testall(4, r, &flag, st));
    if (flag)
        for (i = 0; i < 4; i++)
            CHECK(r[i] == MPI_REQUEST_NULL, "Testall said true and left handle %d", i);
    CHECK_MPI(MPI_Waitall(4, r, st));
    for (i = 0; i < 4; i++)
        CHECK(r[i] == MPI_REQUEST_NULL, "Waitall left handle %d", i);
    CHECK(got[0] == 31000 + 100 * peer + NSMALL - 1, "last message: %d", got[0]);
    /* Everything the peer sent with its own tags */
    for (i = 0; i < NSMALL - 1; i++) {
        CHECK_MPI(MPI_Recv(&got[i], 1, MPI_INT, peer, TAG_SMALL + i, MPI_COMM_WORLD, &st[0]));
        CHECK(got[i] == 31000 + 100 * peer + i, "small message %d: %d", i, got[i]);
    }
}

int main(int argc, char **argv)
{
    int size, t;
    MPI_Init(&argc, &argv);
    test_begin("waitsome");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    peer = rank % 2 == 0 ? rank + 1 : rank - 1;

    null_arrays();
    if (peer < size) {
        if (rank % 2 == 0) {
            for (t = 0; t < NT; t++)
                rbuf[t] = test_malloc(sizeof(int) * BIGN);
            driver();
            for (t = 0; t < NT; t++)
                free(rbuf[t]);
        } else {
            sender();
        }
        small_sends();
    }
    return test_end();
}
