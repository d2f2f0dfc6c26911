/*
 * groups.c - groups and the communicators made from them: every group function against
 * hand-computed answers, Comm_split (rows and columns of a grid, MPI_UNDEFINED), Comm_create
 * (one group, and disjoint groups in one call), Comm_create_group, Comm_split_type, an
 * intercommunicator (Intercomm_create, remote size/group, point-to-point both ways, dup,
 * Intercomm_merge in both orders), Comm_compare, and many create/free cycles.
 *
 * usage: groups [cycles]   (default 1000 dup+split+free cycles)
 */
#include "stormtest.h"

static int rank, size;

static void check_ranks(MPI_Group g, int n, const int *world_ranks, const char *what)
{
    MPI_Group wg;
    int gsize, i, *in, *out;
    CHECK_MPI(MPI_Group_size(g, &gsize));
    CHECK(gsize == n, "%s: size %d, expected %d", what, gsize, n);
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    in = malloc(sizeof(int) * (n + 1));
    out = malloc(sizeof(int) * (n + 1));
    for (i = 0; i < n; i++)
        in[i] = i;
    if (n > 0)
        CHECK_MPI(MPI_Group_translate_ranks(g, n, in, wg, out));
    for (i = 0; i < n; i++)
        CHECK(out[i] == world_ranks[i], "%s: member %d is world rank %d, expected %d", what, i,
              out[i], world_ranks[i]);
    free(in);
    free(out);
    CHECK_MPI(MPI_Group_free(&wg));
}

static void test_groups(void)
{
    MPI_Group world, even, odd, u, x, d, g, back;
    int *ranks = malloc(sizeof(int) * size), *expect = malloc(sizeof(int) * size);
    int n = 0, i, r, result, ranges[2][3];

    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
    CHECK_MPI(MPI_Group_rank(world, &r));
    CHECK(r == rank, "Group_rank(world) = %d", r);
    for (i = 0; i < size; i += 2)
        ranks[n++] = i;
    CHECK_MPI(MPI_Group_incl(world, n, ranks, &even));
    check_ranks(even, n, ranks, "incl(even)");
    CHECK_MPI(MPI_Group_rank(even, &r));
    CHECK(r == (rank % 2 == 0 ? rank / 2 : MPI_UNDEFINED), "Group_rank(even) = %d", r);
    CHECK_MPI(MPI_Group_excl(world, n, ranks, &odd));
    for (i = 0, n = 0; i < size; i++)
        if (i % 2)
            expect[n++] = i;
    check_ranks(odd, n, expect, "excl(even)");

    /* union(odd, even) = odd members then even ones */
    CHECK_MPI(MPI_Group_union(odd, even, &u));
    for (i = 0, n = 0; i < size; i++)
        if (i % 2)
            expect[n++] = i;
    for (i = 0; i < size; i += 2)
        expect[n++] = i;
    check_ranks(u, n, expect, "union(odd, even)");
    CHECK_MPI(MPI_Group_compare(u, world, &result));
    CHECK(result == (size > 1 ? MPI_SIMILAR : MPI_IDENT),
          "compare(union, world) = %d", result);
    CHECK_MPI(MPI_Group_compare(world, world, &result));
    CHECK(result == MPI_IDENT, "compare(world, world) = %d", result);
    CHECK_MPI(MPI_Group_compare(even, world, &result));
    CHECK(result == (size == 1 ? MPI_IDENT : MPI_UNEQUAL), "compare(even, world) = %d", result);

    CHECK_MPI(MPI_Group_intersection(even, world, &x));
    CHECK_MPI(MPI_Group_compare(x, even, &result));
    CHECK(result == MPI_IDENT, "intersection(even, world) != even: %d", result);
    CHECK_MPI(MPI_Group_difference(world, even, &d));
    CHECK_MPI(MPI_Group_compare(d, odd, &result));
    CHECK(result == MPI_IDENT, "difference(world, even) != odd: %d", result);
    CHECK_MPI(MPI_Group_free(&x));
    CHECK_MPI(MPI_Group_free(&d));
    CHECK_MPI(MPI_Group_intersection(even, odd, &x));
    CHECK_MPI(MPI_Group_size(x, &n));
    CHECK(n == 0, "intersection(even, odd) has %d members", n);
    CHECK_MPI(MPI_Group_compare(x, MPI_GROUP_EMPTY, &result));
    CHECK(result == MPI_IDENT, "empty intersection is not MPI_GROUP_EMPTY-like: %d", result);
    if (x != MPI_GROUP_EMPTY)
        CHECK_MPI(MPI_Group_free(&x));

    /* range_incl: ranks size-1 down to 0 by -1, then nothing (empty range) */
    ranges[0][0] = size - 1;
    ranges[0][1] = 0;
    ranges[0][2] = -1;
    CHECK_MPI(MPI_Group_range_incl(world, 1, ranges, &g));
    for (i = 0; i < size; i++)
        expect[i] = size - 1 - i;
    check_ranks(g, size, expect, "range_incl(reverse)");
    CHECK_MPI(MPI_Group_free(&g));
    /* range_excl: drop ranks 0, 3, 6, ... */
    ranges[0][0] = 0;
    ranges[0][1] = size - 1;
    ranges[0][2] = 3;
    CHECK_MPI(MPI_Group_range_excl(world, 1, ranges, &g));
    for (i = 0, n = 0; i < size; i++)
        if (i % 3)
            expect[n++] = i;
    check_ranks(g, n, expect, "range_excl(0:size-1:3)");
    CHECK_MPI(MPI_Group_free(&g));

    /* translate ranks from world into even: odd ones are undefined, PROC_NULL maps to itself */
    for (i = 0; i < size; i++)
        ranks[i] = i;
    CHECK_MPI(MPI_Group_translate_ranks(world, size, ranks, even, expect));
    for (i = 0; i < size; i++)
        CHECK(expect[i] == (i % 2 ? MPI_UNDEFINED : i / 2), "translate %d -> %d", i, expect[i]);
    ranks[0] = MPI_PROC_NULL;
    CHECK_MPI(MPI_Group_translate_ranks(world, 1, ranks, even, expect));
    CHECK(expect[0] == MPI_PROC_NULL, "translate(PROC_NULL) = %d", expect[0]);

    /* errors: rank out of range (a repeated rank is checked by the unit tests: MPICH lets it pass) */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    ranks[0] = size;
    CHECK(MPI_Group_incl(world, 1, ranks, &g) != MPI_SUCCESS, "incl of rank size worked");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    CHECK_MPI(MPI_Group_incl(world, 0, ranks, &back));
    CHECK_MPI(MPI_Group_size(back, &n));
    CHECK(n == 0, "incl of nothing has %d members", n);
    if (back != MPI_GROUP_EMPTY)
        CHECK_MPI(MPI_Group_free(&back));
    CHECK_MPI(MPI_Group_free(&u));
    CHECK_MPI(MPI_Group_free(&even));
    CHECK_MPI(MPI_Group_free(&odd));
    CHECK_MPI(MPI_Group_free(&world));
    CHECK(world == MPI_GROUP_NULL, "Group_free did not null the handle");
    free(ranks);
    free(expect);
}

/* Every member sends its world rank to every other member of `comm`; checks the answers. */
static void check_members(MPI_Comm comm, const int *world_ranks, int n, const char *what)
{
    int r, s, i, v, result;
    MPI_Group g;
    CHECK_MPI(MPI_Comm_rank(comm, &r));
    CHECK_MPI(MPI_Comm_size(comm, &s));
    CHECK(s == n, "%s: size %d, expected %d", what, s, n);
    CHECK(world_ranks[r] == rank, "%s: I am rank %d, expected world rank %d there", what, r,
          world_ranks[r]);
    CHECK_MPI(MPI_Comm_group(comm, &g));
    check_ranks(g, n, world_ranks, what);
    CHECK_MPI(MPI_Group_free(&g));
    for (i = 0; i < s; i++) {
        if (i == r)
            continue;
        CHECK_MPI(MPI_Sendrecv(&rank, 1, MPI_INT, i, 7, &v, 1, MPI_INT, i, 7, comm,
                               MPI_STATUS_IGNORE));
        CHECK(v == world_ranks[i], "%s: rank %d says it is world %d, expected %d", what, i, v,
              world_ranks[i]);
    }
    v = rank;
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_SUM, comm));
    for (i = 0, result = 0; i < n; i++)
        result += world_ranks[i];
    CHECK(v == result, "%s: allreduce %d, expected %d", what, v, result);
}

static void test_split(void)
{
    int cols = size >= 4 ? 2 : 1, i, n, *expect = malloc(sizeof(int) * size);
    MPI_Comm row, col, none, rev;

    /* a grid of `cols` columns: rows by rank / cols, columns by rank % cols */
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank / cols, rank, &row));
    for (i = 0, n = 0; i < size; i++)
        if (i / cols == rank / cols)
            expect[n++] = i;
    check_members(row, expect, n, "row");
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank % cols, rank, &col));
    for (i = 0, n = 0; i < size; i++)
        if (i % cols == rank % cols)
            expect[n++] = i;
    check_members(col, expect, n, "column");

    /* keys reverse the order */
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &rev));
    for (i = 0; i < size; i++)
        expect[i] = size - 1 - i;
    check_members(rev, expect, size, "reversed split");

    /* MPI_UNDEFINED: no communicator for odd ranks */
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank % 2 ? MPI_UNDEFINED : 5, 0, &none));
    if (rank % 2) {
        CHECK(none == MPI_COMM_NULL, "MPI_UNDEFINED color gave a communicator");
    } else {
        for (i = 0, n = 0; i < size; i += 2)
            expect[n++] = i;
        check_members(none, expect, n, "even split");
        CHECK_MPI(MPI_Comm_free(&none));
    }
    /* split of a split */
    {
        MPI_Comm sub;
        int rr;
        CHECK_MPI(MPI_Comm_rank(col, &rr));
        CHECK_MPI(MPI_Comm_split(col, rr % 2, rr, &sub));
        CHECK_MPI(MPI_Comm_size(sub, &n));
        CHECK_MPI(MPI_Comm_free(&sub));
    }
    CHECK_MPI(MPI_Comm_free(&row));
    CHECK_MPI(MPI_Comm_free(&col));
    CHECK_MPI(MPI_Comm_free(&rev));
    free(expect);
}

static void test_create(void)
{
    MPI_Group world, g;
    MPI_Comm c;
    int *ranks = malloc(sizeof(int) * size), n, i, half = (size + 1) / 2;

    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
    /* one group: the upper half, reversed */
    for (i = size - 1, n = 0; i >= size / 2; i--)
        ranks[n++] = i;
    CHECK_MPI(MPI_Group_incl(world, n, ranks, &g));
    CHECK_MPI(MPI_Comm_create(MPI_COMM_WORLD, g, &c));
    if (rank >= size / 2)
        check_members(c, ranks, n, "create(upper half reversed)");
    else
        CHECK(c == MPI_COMM_NULL, "non-member got a communicator from Comm_create");
    if (c != MPI_COMM_NULL)
        CHECK_MPI(MPI_Comm_free(&c));
    CHECK_MPI(MPI_Group_free(&g));

    /* disjoint groups in one call: lower half and upper half */
    n = 0;
    if (rank < half)
        for (i = 0; i < half; i++)
            ranks[n++] = i;
    else
        for (i = half; i < size; i++)
            ranks[n++] = i;
    CHECK_MPI(MPI_Group_incl(world, n, ranks, &g));
    CHECK_MPI(MPI_Comm_create(MPI_COMM_WORLD, g, &c));
    check_members(c, ranks, n, "create(disjoint halves)");
    CHECK_MPI(MPI_Comm_free(&c));

    /* create_group: only the members call */
    CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, g, 42, &c));
    check_members(c, ranks, n, "create_group(halves)");
    CHECK_MPI(MPI_Comm_free(&c));
    CHECK_MPI(MPI_Group_free(&g));
    if (rank % 2 == 0) {
        for (i = 0, n = 0; i < size; i += 2)
            ranks[n++] = i;
        CHECK_MPI(MPI_Group_incl(world, n, ranks, &g));
        CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, g, 7, &c));
        check_members(c, ranks, n, "create_group(even)");
        CHECK_MPI(MPI_Comm_free(&c));
        CHECK_MPI(MPI_Group_free(&g));
    }
    CHECK_MPI(MPI_Group_free(&world));

    /* split_type shared: everyone runs on this one node */
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &c));
    for (i = 0; i < size; i++)
        ranks[i] = i;
    check_members(c, ranks, size, "split_type(shared)");
    CHECK_MPI(MPI_Comm_free(&c));
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_UNDEFINED, rank, MPI_INFO_NULL, &c));
    CHECK(c == MPI_COMM_NULL, "split_type(MPI_UNDEFINED) gave a communicator");
    free(ranks);
}

static void test_intercomm(void)
{
    MPI_Comm half, inter, dup, merged;
    MPI_Group rg;
    int color = rank % 2, lr, ls, rs, flag, i, v, result, *ranks;

    if (size < 2)
        return;
    ranks = malloc(sizeof(int) * size);
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half));
    CHECK_MPI(MPI_Comm_rank(half, &lr));
    CHECK_MPI(MPI_Comm_size(half, &ls));
    /* leaders: world rank 0 for the even side, world rank 1 for the odd side */
    CHECK_MPI(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, color ? 0 : 1, 99, &inter));
    CHECK_MPI(MPI_Comm_test_inter(inter, &flag));
    CHECK(flag, "Comm_test_inter is false on an intercommunicator");
    CHECK_MPI(MPI_Comm_test_inter(half, &flag));
    CHECK(!flag, "Comm_test_inter is true on an intracommunicator");
    CHECK_MPI(MPI_Comm_remote_size(inter, &rs));
    CHECK(rs == (color ? (size + 1) / 2 : size / 2), "remote size %d", rs);
    CHECK_MPI(MPI_Comm_size(inter, &v));
    CHECK(v == ls, "intercomm size %d, local group %d", v, ls);
    CHECK_MPI(MPI_Comm_remote_group(inter, &rg));
    for (i = 0; i < rs; i++)
        ranks[i] = 2 * i + (1 - color);
    check_ranks(rg, rs, ranks, "remote group");
    CHECK_MPI(MPI_Group_free(&rg));

    /* point-to-point across: local rank k and remote rank k, for k below both sizes */
    if (lr < rs) {
        CHECK_MPI(MPI_Sendrecv(&rank, 1, MPI_INT, lr, 3, &v, 1, MPI_INT, lr, 3, inter,
                               MPI_STATUS_IGNORE));
        CHECK(v == ranks[lr], "remote rank %d says world %d, expected %d", lr, v, ranks[lr]);
    }
    /* a ring across: everyone sends to remote rank lr % rs and receives with ANY_SOURCE */
    CHECK_MPI(MPI_Comm_dup(inter, &dup));
    CHECK_MPI(MPI_Comm_compare(inter, dup, &result));
    CHECK(result == MPI_CONGRUENT, "compare(inter, dup) = %d", result);
    {
        /* count how many of the remote side target me: remote j targets my rank j % ls */
        int incoming = 0, j;
        MPI_Request req;
        for (j = 0; j < rs; j++)
            if (j % ls == lr)
                incoming++;
        CHECK_MPI(MPI_Isend(&rank, 1, MPI_INT, lr % rs, 5, dup, &req));
        for (j = 0; j < incoming; j++) {
            MPI_Status st;
            CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 5, dup, &st));
            CHECK(v == 2 * st.MPI_SOURCE + (1 - color), "dup: remote %d says world %d",
                  st.MPI_SOURCE, v);
        }
        CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    }
    CHECK_MPI(MPI_Comm_free(&dup));

    /* merge: odd side high -> evens first */
    CHECK_MPI(MPI_Intercomm_merge(inter, color, &merged));
    for (i = 0, v = 0; i < size; i += 2)
        ranks[v++] = i;
    for (i = 1; i < size; i += 2)
        ranks[v++] = i;
    check_members(merged, ranks, size, "merge(odd high)");
    CHECK_MPI(MPI_Comm_free(&merged));
    /* merge: even side high -> odds first */
    CHECK_MPI(MPI_Intercomm_merge(inter, !color, &merged));
    for (i = 1, v = 0; i < size; i += 2)
        ranks[v++] = i;
    for (i = 0; i < size; i += 2)
        ranks[v++] = i;
    check_members(merged, ranks, size, "merge(even high)");
    CHECK_MPI(MPI_Comm_free(&merged));
    CHECK_MPI(MPI_Comm_free(&inter));
    CHECK(inter == MPI_COMM_NULL, "Comm_free did not null an intercommunicator handle");
    CHECK_MPI(MPI_Comm_free(&half));
    free(ranks);
}

/* Communicators made and freed in a loop: context ids and groups must be recycled. */
static void test_cycles(int cycles)
{
    int i, v;
    MPI_Comm a, b;
    for (i = 0; i < cycles; i++) {
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &a));
        CHECK_MPI(MPI_Comm_split(a, rank % 2, -rank, &b));
        if (i % 97 == 0) {
            v = 1;
            CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_SUM, b));
            CHECK(v == (size + (rank % 2 ? 0 : 1)) / 2, "cycle %d: split size %d", i, v);
        }
        CHECK_MPI(MPI_Comm_free(&b));
        CHECK_MPI(MPI_Comm_free(&a));
    }
}

int main(int argc, char **argv)
{
    int cycles = 1000;
    MPI_Init(&argc, &argv);
    test_begin("groups");
    if (argc > 1)
        cycles = atoi(argv[1]);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    test_groups();
    test_split();
    test_create();
    test_intercomm();
    test_cycles(cycles);
    return test_end();
}
