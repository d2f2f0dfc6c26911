/*
 * intercomm_split.c - communicators made from intercommunicators, and from two groups.
 *
 * World is cut into side A (even world ranks) and side B (odd ones), joined by
 * MPI_Intercomm_create. Checked: MPI_Comm_split on the intercommunicator (color = local rank
 * mod 2, keys reversing the order; from 3 members on a side, A's last member takes a color B
 * never uses and B's last MPI_UNDEFINED, both getting MPI_COMM_NULL) gives intercommunicators
 * whose local and remote groups are the members of each side with that color, ranked by key;
 * MPI_Comm_create on it (A passes its group without its rank 0, B its whole group) likewise;
 * MPI_Intercomm_create_from_groups from the two sides' groups of MPI_COMM_WORLD. On each new
 * intercommunicator: MPI_Comm_test_inter, sizes and rank, a message from the remote member of
 * the same rank carrying its world rank, and an MPI_Allreduce (the remote group's sum of world
 * ranks).
 *
 * usage: intercomm_split
 */
#include "stormtest.h"

static int wrank, wsize;

/* The world rank of local rank r of side s (0: A, even world ranks; 1: B, odd). */
static int world_of(int s, int r)
{
    return 2 * r + s;
}

static int side_size(int s)
{
    return s == 0 ? (wsize + 1) / 2 : wsize / 2;
}

/* The split color of local rank r of side s. */
static int color_of(int s, int r)
{
    int n = side_size(s);
    if (n >= 3 && r == n - 1)
        return s == 0 ? 7 : MPI_UNDEFINED;
    return r % 2;
}

/* Checks intercommunicator c whose local group is side s's ranks `mine` (in new rank order)
 * and remote group side 1-s's ranks `theirs`. */
static void check_inter(MPI_Comm c, int s, const int *mine, int nmine, const int *theirs,
                        int ntheirs, const char *what)
{
    int inter, rank, size, rsize, i, me = -1, sum = 0, got;
    CHECK(c != MPI_COMM_NULL, "%s: got MPI_COMM_NULL", what);
    CHECK_MPI(MPI_Comm_test_inter(c, &inter));
    CHECK(inter, "%s: not an intercommunicator", what);
    CHECK_MPI(MPI_Comm_rank(c, &rank));
    CHECK_MPI(MPI_Comm_size(c, &size));
    CHECK_MPI(MPI_Comm_remote_size(c, &rsize));
    for (i = 0; i < nmine; i++)
        if (world_of(s, mine[i]) == wrank)
            me = i;
    CHECK(size == nmine && rsize == ntheirs && rank == me,
          "%s: size %d remote size %d rank %d, expected %d %d %d", what, size, rsize, rank, nmine,
          ntheirs, me);
    if (rank < rsize) {
        int w = -1;
        MPI_Request rq;
        CHECK_MPI(MPI_Irecv(&w, 1, MPI_INT, rank, 3, c, &rq));
        CHECK_MPI(MPI_Send(&wrank, 1, MPI_INT, rank, 3, c));
        CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        CHECK(w == world_of(1 - s, theirs[rank]), "%s: remote rank %d is world rank %d, expected %d",
              what, rank, w, world_of(1 - s, theirs[rank]));
    }
    for (i = 0; i < ntheirs; i++)
        sum += world_of(1 - s, theirs[i]);
    CHECK_MPI(MPI_Allreduce(&wrank, &got, 1, MPI_INT, MPI_SUM, c));
    CHECK(got == sum, "%s: Allreduce gave %d, expected %d", what, got, sum);
}

int main(int argc, char **argv)
{
    int s, lrank, lsize, i, n0, n1, col, mine[64], theirs[64], nm, nt;
    MPI_Comm local, inter, c;
    MPI_Group wg, g0, g1, lg, sub;

    MPI_Init(&argc, &argv);
    test_begin("intercomm_split");
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &wrank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &wsize));
    CHECK(wsize >= 2 && wsize <= 128, "needs 2 to 128 ranks");
    s = wrank % 2;
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, s, wrank, &local));
    CHECK_MPI(MPI_Comm_rank(local, &lrank));
    CHECK_MPI(MPI_Comm_size(local, &lsize));
    CHECK_MPI(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 1 - s, 11, &inter));
    n0 = side_size(s);
    n1 = side_size(1 - s);

    /* MPI_Comm_split: keys reverse the local order */
    col = color_of(s, lrank);
    CHECK_MPI(MPI_Comm_split(inter, col, -lrank, &c));
    nm = nt = 0;
    for (i = n0 - 1; i >= 0; i--)
        if (color_of(s, i) == col)
            mine[nm++] = i;
    for (i = n1 - 1; i >= 0; i--)
        if (color_of(1 - s, i) == col)
            theirs[nt++] = i;
    if (col == MPI_UNDEFINED || nt == 0) {
        CHECK(c == MPI_COMM_NULL, "split: color %d has no remote members, yet a communicator",
              col);
    } else {
        check_inter(c, s, mine, nm, theirs, nt, "Comm_split of an intercommunicator");
        CHECK_MPI(MPI_Comm_free(&c));
    }

    /* MPI_Comm_create: A without its rank 0 (when it has more), B whole */
    CHECK_MPI(MPI_Comm_group(inter, &lg));
    if (s == 0 && lsize > 1) {
        int zero = 0;
        CHECK_MPI(MPI_Group_excl(lg, 1, &zero, &sub));
    } else {
        CHECK_MPI(MPI_Comm_group(inter, &sub));
    }
    CHECK_MPI(MPI_Comm_create(inter, sub, &c));
    nm = nt = 0;
    for (i = (s == 0 && n0 > 1); i < n0; i++)
        mine[nm++] = i;
    for (i = (s == 1 && n1 > 1); i < n1; i++)
        theirs[nt++] = i;
    if (s == 0 && lsize > 1 && lrank == 0) {
        CHECK(c == MPI_COMM_NULL, "create: rank 0 of A is not in its group, yet a communicator");
    } else {
        check_inter(c, s, mine, nm, theirs, nt, "Comm_create of an intercommunicator");
        CHECK_MPI(MPI_Comm_free(&c));
    }
    CHECK_MPI(MPI_Group_free(&sub));
    CHECK_MPI(MPI_Group_free(&lg));

    /* MPI_Intercomm_create_from_groups over the world's two sides, twice (MPI 4: Open MPI 4.1
     * does not have it) */
#if MPI_VERSION >= 4
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    {
        int r0[3] = {0, wsize - 1 - (wsize - 1) % 2, 2}, r1[3] = {1, wsize - 1 - wsize % 2, 2};
        CHECK_MPI(MPI_Group_range_incl(wg, 1, &r0, &g0));
        CHECK_MPI(MPI_Group_range_incl(wg, 1, &r1, &g1));
    }
    for (i = 0; i < 2; i++) {
        int leader = i == 0 ? 0 : side_size(s) - 1, rleader = i == 0 ? 0 : side_size(1 - s) - 1;
        int k;
        CHECK_MPI(MPI_Intercomm_create_from_groups(s == 0 ? g0 : g1, leader, s == 0 ? g1 : g0,
                                                   rleader, i == 0 ? "stormpi.a" : "stormpi.b",
                                                   MPI_INFO_NULL, MPI_ERRORS_RETURN, &c));
        for (k = 0; k < n0; k++)
            mine[k] = k;
        for (k = 0; k < n1; k++)
            theirs[k] = k;
        check_inter(c, s, mine, n0, theirs, n1, "Intercomm_create_from_groups");
        {
            MPI_Errhandler eh;
            CHECK_MPI(MPI_Comm_get_errhandler(c, &eh));
            CHECK(eh == MPI_ERRORS_RETURN, "Intercomm_create_from_groups: not the error handler given");
            CHECK_MPI(MPI_Errhandler_free(&eh));
        }
        CHECK_MPI(MPI_Comm_free(&c));
    }
    CHECK_MPI(MPI_Group_free(&g0));
    CHECK_MPI(MPI_Group_free(&g1));
    CHECK_MPI(MPI_Group_free(&wg));
#else
    (void)wg, (void)g0, (void)g1;
    if (wrank == 0)
        printf("note: MPI_Intercomm_create_from_groups is MPI 4, this library MPI %d: skipped\n",
               MPI_VERSION);
#endif

    CHECK_MPI(MPI_Comm_free(&inter));
    CHECK_MPI(MPI_Comm_free(&local));
    return test_end();
}
