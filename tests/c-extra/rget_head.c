/*
 * rget_head.c - large messages whose first bytes may travel with the rendezvous offer
 * (btl_verbs_rndv_eager_limit) and the rest by RDMA (2 ranks, rank 0 sends, rank 1 receives):
 *
 *   1. contiguous bytes, the receive posted first and posted late (unexpected);
 *   2. the same message received into a strided buffer (every other int of twice the room): the
 *      receiver cannot read it where it lies and asks for the rest in fragments, after the bytes
 *      the offer carried;
 *   3. a message of odd length (not a whole number of ints at the end).
 * Every byte is checked, and the received count.
 *
 * usage: rget_head [bytes]   (default 1 MiB; a multiple of 4)
 */
#include "stormtest.h"

static int rank;
static size_t n;

static void expect_count(MPI_Status *st, MPI_Datatype t, int want, const char *what)
{
    int count;
    CHECK_MPI(MPI_Get_count(st, t, &count));
    CHECK(count == want, "%s: count %d, want %d", what, count, want);
}

/* Contiguous message `len` bytes with tag `tag`; `late`: the receive is posted after the
 * message arrived. */
static void contiguous(size_t len, int tag, int late)
{
    unsigned char *buf = malloc(len);
    CHECK(buf != NULL, "malloc");
    uint64_t key = test_key(0, 1, len, tag);
    if (rank == 0) {
        pattern_fill(buf, len, key);
        CHECK_MPI(MPI_Send(buf, (int)len, MPI_BYTE, 1, tag, MPI_COMM_WORLD));
    } else {
        memset(buf, 0xEE, len);
        if (late) {
            MPI_Status st;
            CHECK_MPI(MPI_Probe(0, tag, MPI_COMM_WORLD, &st));
        }
        MPI_Status st;
        CHECK_MPI(MPI_Recv(buf, (int)len, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st));
        expect_count(&st, MPI_BYTE, (int)len, "contiguous");
        long bad = pattern_check(buf, len, key);
        CHECK(bad < 0, "contiguous %zu bytes (tag %d): differs at byte %ld", len, tag, bad);
    }
    free(buf);
}

/* `n / 4` ints sent contiguously, received into every other int of a buffer twice the size. */
static void strided(int tag)
{
    int count = (int)(n / 4);
    int *buf = malloc((size_t)count * 2 * sizeof(int));
    CHECK(buf != NULL, "malloc");
    if (rank == 0) {
        for (int i = 0; i < count; i++)
            buf[i] = i * 7 + 1;
        CHECK_MPI(MPI_Send(buf, count, MPI_INT, 1, tag, MPI_COMM_WORLD));
    } else {
        MPI_Datatype every_other;
        CHECK_MPI(MPI_Type_vector(count, 1, 2, MPI_INT, &every_other));
        CHECK_MPI(MPI_Type_commit(&every_other));
        for (int i = 0; i < 2 * count; i++)
            buf[i] = -1;
        MPI_Status st;
        CHECK_MPI(MPI_Recv(buf, 1, every_other, 0, tag, MPI_COMM_WORLD, &st));
        expect_count(&st, MPI_INT, count, "strided");
        for (int i = 0; i < count; i++) {
            CHECK(buf[2 * i] == i * 7 + 1, "strided: element %d is %d", i, buf[2 * i]);
            CHECK(buf[2 * i + 1] == -1, "strided: gap %d overwritten (%d)", i, buf[2 * i + 1]);
        }
        CHECK_MPI(MPI_Type_free(&every_other));
    }
    free(buf);
}

int main(int argc, char **argv)
{
    CHECK_MPI(MPI_Init(&argc, &argv));
    int size;
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size == 2, "run at 2 ranks");
    n = argc > 1 ? (size_t)strtoull(argv[1], NULL, 0) : (size_t)1 << 20;
    CHECK(n >= 4096 && n % 4 == 0, "bytes: a multiple of 4 from 4096");
    contiguous(n, 1, 0);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    contiguous(n, 2, 1);
    strided(3);
    contiguous(n + 3, 4, 0);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0)
        printf("OK rget_head\n");
    CHECK_MPI(MPI_Finalize());
    return 0;
}
