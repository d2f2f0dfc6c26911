/*
 * Issue 18: communicator info assertions acted on. Comm_get_info returns exactly the
 * assertions in force ("true"; unknown keys and "false" values not returned); Comm_set_info
 * changes only the keys it names; Comm_dup keeps the hints, Comm_dup_with_info,
 * Comm_idup_with_info, Comm_split_type and Comm_create_from_group take the info's only; a
 * wildcard receive or probe on a communicator that asserts it away fails (MPI_ERRORS_RETURN)
 * with MPI_ERR_RANK / MPI_ERR_TAG, while exact ones work; ping-pong and many messages in both directions, with all four assertions, arrive intact;
 * with overtaking allowed every message still arrives (each tag once).
 */
#include "stormtest.h"

#include <string.h>

static const char *KEYS[4] = {"mpi_assert_no_any_source", "mpi_assert_no_any_tag",
                              "mpi_assert_allow_overtaking", "mpi_assert_exact_length"};

/* The info's value of `key` is "true" (want 1) or the key is absent (want 0). */
static void expect_key(MPI_Info info, const char *key, int want)
{
    char value[MPI_MAX_INFO_VAL + 1] = "";
    int flag = 0;
    CHECK_MPI(MPI_Info_get(info, key, MPI_MAX_INFO_VAL, value, &flag));
    CHECK(flag == want, "key %s: flag %d, want %d", key, flag, want);
    if (want)
        CHECK(strcmp(value, "true") == 0, "key %s has value '%s'", key, value);
}

/* Comm_get_info of `c` holds exactly the assertions of bit mask `mask` (bit i = KEYS[i]). */
static void expect_hints(MPI_Comm c, int mask)
{
    MPI_Info used;
    int nkeys = -1, n = 0;
    CHECK_MPI(MPI_Comm_get_info(c, &used));
    for (int i = 0; i < 4; i++) {
        expect_key(used, KEYS[i], (mask >> i) & 1);
        n += (mask >> i) & 1;
    }
    CHECK_MPI(MPI_Info_get_nkeys(used, &nkeys));
    CHECK(nkeys == n, "get_info has %d keys, want %d (mask %x)", nkeys, n, mask);
    CHECK_MPI(MPI_Info_free(&used));
}

static MPI_Info make_info(int mask, int with_false_and_unknown)
{
    MPI_Info info;
    CHECK_MPI(MPI_Info_create(&info));
    for (int i = 0; i < 4; i++) {
        if ((mask >> i) & 1)
            CHECK_MPI(MPI_Info_set(info, KEYS[i], i % 2 ? "TRUE" : "true"));
        else if (with_false_and_unknown)
            CHECK_MPI(MPI_Info_set(info, KEYS[i], "false"));
    }
    if (with_false_and_unknown)
        CHECK_MPI(MPI_Info_set(info, "stormpi_no_such_hint", "true"));
    return info;
}

static void wildcards_refused(MPI_Comm c, int rank, int size)
{
    int x = 0, flag = 0, cls = 0, rc;
    MPI_Request req;
    MPI_Status st;
    CHECK_MPI(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
    rc = MPI_Irecv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 0, c, &req);
    CHECK(rc != MPI_SUCCESS, "Irecv from MPI_ANY_SOURCE accepted under no_any_source");
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RANK, "ANY_SOURCE refused with class %d, want MPI_ERR_RANK", cls);
    {
        char msg[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        CHECK(strstr(msg, "mpi_assert_no_any_source") != NULL, "message '%s' names no hint", msg);
    }
    rc = MPI_Recv(&x, 1, MPI_INT, 0, MPI_ANY_TAG, c, &st);
    CHECK(rc != MPI_SUCCESS, "Recv with MPI_ANY_TAG accepted under no_any_tag");
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_TAG, "ANY_TAG refused with class %d, want MPI_ERR_TAG", cls);
    rc = MPI_Iprobe(MPI_ANY_SOURCE, 3, c, &flag, &st);
    CHECK(rc != MPI_SUCCESS, "Iprobe from MPI_ANY_SOURCE accepted under no_any_source");
    rc = MPI_Iprobe(0, MPI_ANY_TAG, c, &flag, &st);
    CHECK(rc != MPI_SUCCESS, "Iprobe with MPI_ANY_TAG accepted under no_any_tag");
    /* Exact receives and MPI_PROC_NULL still work. */
    CHECK_MPI(MPI_Recv(&x, 1, MPI_INT, MPI_PROC_NULL, 5, c, &st));
    CHECK_MPI(MPI_Iprobe((rank + 1) % size, 3, c, &flag, &st));
    CHECK_MPI(MPI_Comm_set_errhandler(c, MPI_ERRORS_ARE_FATAL));
}

/* Ping-pong with each neighbour pair, then many messages of several tags from everyone to
 * everyone, checked by content. */
static void traffic(MPI_Comm c, int rank, int size, int count)
{
    int peer = rank ^ 1;
    if (peer < size) {
        for (int i = 0; i < 200; i++) {
            int v = rank * 1000 + i, got = -1;
            if (rank % 2 == 0) {
                CHECK_MPI(MPI_Send(&v, 1, MPI_INT, peer, 7, c));
                CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, peer, 7, c, MPI_STATUS_IGNORE));
            } else {
                CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, peer, 7, c, MPI_STATUS_IGNORE));
                CHECK_MPI(MPI_Send(&v, 1, MPI_INT, peer, 7, c));
            }
            CHECK(got == peer * 1000 + i, "ping-pong %d got %d", i, got);
        }
    }
    int n = size * count;
    int *in = test_malloc(sizeof(int) * n), *out = test_malloc(sizeof(int) * n);
    MPI_Request *reqs = test_malloc(sizeof(MPI_Request) * 2 * n);
    int k = 0;
    for (int p = 0; p < size; p++)
        for (int i = 0; i < count; i++) {
            in[p * count + i] = -1;
            CHECK_MPI(MPI_Irecv(&in[p * count + i], 1, MPI_INT, p, i % 5, c, &reqs[k++]));
        }
    for (int p = 0; p < size; p++)
        for (int i = 0; i < count; i++) {
            out[p * count + i] = rank * 100000 + p * 1000 + i;
            CHECK_MPI(MPI_Isend(&out[p * count + i], 1, MPI_INT, p, i % 5, c, &reqs[k++]));
        }
    CHECK_MPI(MPI_Waitall(k, reqs, MPI_STATUSES_IGNORE));
    /* Receives of one tag from one sender match in order, unless overtaking is allowed: then
     * each value must still arrive exactly once. */
    int overtaking = 0;
    {
        MPI_Info used;
        int flag = 0;
        char v[16];
        CHECK_MPI(MPI_Comm_get_info(c, &used));
        CHECK_MPI(MPI_Info_get(used, "mpi_assert_allow_overtaking", 15, v, &flag));
        overtaking = flag;
        CHECK_MPI(MPI_Info_free(&used));
    }
    for (int p = 0; p < size; p++) {
        int seen[64] = {0};
        for (int i = 0; i < count; i++) {
            int v = in[p * count + i];
            int from = v / 100000, to = (v / 1000) % 100, j = v % 1000;
            CHECK(from == p && to == rank, "message from %d holds %d", p, v);
            CHECK(j % 5 == i % 5, "tag %d message holds index %d", i % 5, j);
            if (!overtaking)
                CHECK(j == i, "message %d from %d out of order: holds %d", i, p, j);
            CHECK(j < 64 && !seen[j], "message %d from %d arrived twice", j, p);
            seen[j] = 1;
        }
    }
    free(in);
    free(out);
    free(reqs);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Comm c, d, e, f;
    MPI_Request req;
    MPI_Info info;

    MPI_Init(&argc, &argv);
    test_begin("comm_hints");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* None by default. */
    expect_hints(MPI_COMM_WORLD, 0);

    /* dup_with_info: only "true" assertion keys are in force. */
    info = make_info(0x5, 1);
    CHECK_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c));
    CHECK_MPI(MPI_Info_free(&info));
    expect_hints(c, 0x5);

    /* set_info changes the keys it names, leaves the others. */
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "mpi_assert_no_any_tag", "true"));
    CHECK_MPI(MPI_Info_set(info, "mpi_assert_exact_length", "False"));
    CHECK_MPI(MPI_Comm_set_info(c, info));
    CHECK_MPI(MPI_Info_free(&info));
    expect_hints(c, 0x7);

    /* dup keeps them, dup_with_info replaces them, idup_with_info too. */
    CHECK_MPI(MPI_Comm_dup(c, &d));
    expect_hints(d, 0x7);
    info = make_info(0x8, 0);
    CHECK_MPI(MPI_Comm_dup_with_info(d, info, &e));
    expect_hints(e, 0x8);
    CHECK_MPI(MPI_Comm_idup_with_info(c, info, &f, &req));
    CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Info_free(&info));
    expect_hints(f, 0x8);
    CHECK_MPI(MPI_Comm_free(&e));
    CHECK_MPI(MPI_Comm_free(&f));
    CHECK_MPI(MPI_Comm_dup_with_info(d, MPI_INFO_NULL, &e));
    expect_hints(e, 0);
    CHECK_MPI(MPI_Comm_free(&e));

    /* split_type's info. */
    info = make_info(0x2, 0);
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, info, &e));
    CHECK_MPI(MPI_Info_free(&info));
    expect_hints(e, 0x2);
    CHECK_MPI(MPI_Comm_free(&e));

    /* create_from_group's info. */
    {
        MPI_Group g;
        CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &g));
        info = make_info(0x9, 1);
        CHECK_MPI(MPI_Comm_create_from_group(g, "comm_hints", info, MPI_ERRORS_ARE_FATAL, &e));
        CHECK_MPI(MPI_Info_free(&info));
        CHECK_MPI(MPI_Group_free(&g));
        expect_hints(e, 0x9);
        CHECK_MPI(MPI_Comm_free(&e));
    }

    wildcards_refused(d, rank, size);
    /* The world is not affected: a wildcard receive works there. */
    {
        int v = rank, got = -1;
        MPI_Status st;
        CHECK_MPI(MPI_Sendrecv(&v, 1, MPI_INT, (rank + 1) % size, 11, &got, 1, MPI_INT,
                               MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        CHECK(got == (rank + size - 1) % size && st.MPI_TAG == 11, "wildcard world got %d", got);
    }

    /* Traffic with all four assertions, with the two wildcard ones, and with none. */
    info = make_info(0xf, 0);
    CHECK_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &e));
    CHECK_MPI(MPI_Info_free(&info));
    expect_hints(e, 0xf);
    traffic(e, rank, size, 50);
    traffic(d, rank, size, 50);
    traffic(MPI_COMM_WORLD, rank, size, 50);
    /* Collectives still work on a communicator with every assertion. */
    {
        int sum = 0;
        CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, e));
        CHECK(sum == size * (size - 1) / 2, "Allreduce gave %d", sum);
    }
    CHECK_MPI(MPI_Comm_free(&e));
    CHECK_MPI(MPI_Comm_free(&d));
    CHECK_MPI(MPI_Comm_free(&c));
    return test_end();
}
