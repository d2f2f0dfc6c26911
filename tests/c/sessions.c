/*
 * sessions.c - MPI-4 sessions mixed with the world model in one process.
 *
 *   A. MPI_Session_init before MPI_Init (MPI_Initialized stays false); the process sets
 *      (MPI_Session_get_num_psets / get_nth_pset with the length query), mpi://WORLD's info
 *      (mpi_size), MPI_Session_get_info.
 *   B. MPI_Group_from_session_pset("mpi://world", case-insensitive) and MPI_Comm_create_from_group:
 *      an allreduce and a ring of messages on it; a second session's mpi://SELF communicator.
 *   C. Errors: an unknown pset is MPI_ERR_ARG through the session's MPI_ERRORS_RETURN; then a
 *      session error handler (MPI_Session_create_errhandler / set / get) is called with the
 *      session and the code, for an error and for MPI_Session_call_errhandler.
 *   D. MPI_Init after the sessions: MPI_COMM_WORLD works beside the session's communicator;
 *      two MPI_Comm_create_from_group calls on overlapping groups with different string tags.
 *   E. MPI_Finalize while both sessions live: MPI_Finalized is true, the session's communicator
 *      still works; then the communicators and sessions go, the last one ending MPI.
 */
#include "stormtest.h"

static int handler_calls, handler_code;
static MPI_Session handler_session;

static void on_error(MPI_Session *s, int *code, ...)
{
    handler_calls++;
    handler_code = *code;
    handler_session = *s;
}

static void check_comm(MPI_Comm c, int expect_size, int world_rank, const char *what)
{
    int size = -1, rank = -1, sum = 0, token = -1, i;
    CHECK_MPI(MPI_Comm_size(c, &size));
    CHECK_MPI(MPI_Comm_rank(c, &rank));
    CHECK(size == expect_size, "%s: size %d, not %d", what, size, expect_size);
    CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, c));
    CHECK(sum == size * (size - 1) / 2, "%s: allreduce gave %d", what, sum);
    for (i = 0; i < 3; i++) {
        int out = rank * 100 + i + world_rank * 0;
        CHECK_MPI(MPI_Sendrecv(&out, 1, MPI_INT, (rank + 1) % size, 4, &token, 1, MPI_INT,
                               (rank + size - 1) % size, 4, c, MPI_STATUS_IGNORE));
        CHECK(token == ((rank + size - 1) % size) * 100 + i, "%s: ring got %d", what, token);
    }
}

int main(int argc, char **argv)
{
    MPI_Session s1 = MPI_SESSION_NULL, s2 = MPI_SESSION_NULL;
    MPI_Group g;
    MPI_Comm wc, sc, even, odd;
    MPI_Info info;
    MPI_Errhandler eh, got;
    int flag = -1, n = 0, i, len, rc, wsize, wrank;
    char name[64], value[MPI_MAX_INFO_VAL + 1];

    /* A */
    CHECK_MPI(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s1));
    CHECK(s1 != MPI_SESSION_NULL, "A: MPI_Session_init gave MPI_SESSION_NULL");
    CHECK_MPI(MPI_Initialized(&flag));
    CHECK(flag == 0, "A: MPI_Initialized is true after MPI_Session_init alone");
    CHECK_MPI(MPI_Session_get_num_psets(s1, MPI_INFO_NULL, &n));
    CHECK(n >= 2, "A: %d process sets", n);
    int have_world = 0, have_self = 0;
    for (i = 0; i < n; i++) {
        len = 0;
        CHECK_MPI(MPI_Session_get_nth_pset(s1, MPI_INFO_NULL, i, &len, NULL));
        CHECK(len > 1 && len <= (int)sizeof name, "A: pset %d length %d", i, len);
        CHECK_MPI(MPI_Session_get_nth_pset(s1, MPI_INFO_NULL, i, &len, name));
        CHECK((int)strlen(name) == len - 1, "A: pset %d name '%s' length %d", i, name, len);
        have_world |= strcmp(name, "mpi://WORLD") == 0;
        have_self |= strcmp(name, "mpi://SELF") == 0;
    }
    CHECK(have_world && have_self, "A: psets lack mpi://WORLD or mpi://SELF");
    CHECK_MPI(MPI_Session_get_pset_info(s1, "mpi://WORLD", &info));
    CHECK_MPI(MPI_Info_get(info, "mpi_size", MPI_MAX_INFO_VAL, value, &flag));
    CHECK(flag, "A: mpi://WORLD's info has no mpi_size");
    wsize = atoi(value);
    CHECK(wsize >= 1, "A: mpi_size is '%s'", value);
    CHECK_MPI(MPI_Info_free(&info));
    CHECK_MPI(MPI_Session_get_info(s1, &info));
    CHECK_MPI(MPI_Info_get(info, "thread_level", MPI_MAX_INFO_VAL, value, &flag));
    CHECK(flag && strncmp(value, "MPI_THREAD_", 11) == 0, "A: session thread_level '%s'", value);
    CHECK_MPI(MPI_Info_free(&info));

    /* B */
    CHECK_MPI(MPI_Group_from_session_pset(s1, "mpi://world", &g));
    CHECK_MPI(MPI_Group_size(g, &i));
    CHECK(i == wsize, "B: world pset group size %d, mpi_size %d", i, wsize);
    CHECK_MPI(MPI_Group_rank(g, &wrank));
    stormtest_rank = wrank;
    stormtest_name = "sessions";
    CHECK_MPI(MPI_Comm_create_from_group(g, "org.stormpi.test.world", MPI_INFO_NULL,
                                         MPI_ERRORS_RETURN, &wc));
    CHECK_MPI(MPI_Group_free(&g));
    check_comm(wc, wsize, wrank, "B: session world");
    CHECK_MPI(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &s2));
    CHECK(s2 != s1, "B: two sessions share a handle");
    CHECK_MPI(MPI_Group_from_session_pset(s2, "MPI://SELF", &g));
    CHECK_MPI(MPI_Comm_create_from_group(g, "org.stormpi.test.self", MPI_INFO_NULL,
                                         MPI_ERRORS_RETURN, &sc));
    CHECK_MPI(MPI_Group_free(&g));
    check_comm(sc, 1, wrank, "B: session self");

    /* C */
    rc = MPI_Group_from_session_pset(s1, "mpi://nowhere", &g);
    int cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_ARG, "C: unknown pset gave class %d, not MPI_ERR_ARG", cls);
    CHECK_MPI(MPI_Session_create_errhandler(on_error, &eh));
    CHECK_MPI(MPI_Session_set_errhandler(s1, eh));
    CHECK_MPI(MPI_Session_get_errhandler(s1, &got));
    CHECK(got == eh, "C: MPI_Session_get_errhandler gave another handler");
    CHECK_MPI(MPI_Errhandler_free(&got));
    rc = MPI_Group_from_session_pset(s1, "mpi://nowhere", &g);
    CHECK(rc != MPI_SUCCESS && handler_calls == 1 && handler_code == rc && handler_session == s1,
          "C: the session's handler was called %d times (code %d, rc %d)", handler_calls,
          handler_code, rc);
    CHECK_MPI(MPI_Session_call_errhandler(s1, MPI_ERR_OTHER));
    CHECK(handler_calls == 2 && handler_code == MPI_ERR_OTHER,
          "C: MPI_Session_call_errhandler: %d calls, code %d", handler_calls, handler_code);
    CHECK_MPI(MPI_Session_set_errhandler(s1, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Errhandler_free(&eh));

    /* D */
    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Initialized(&flag));
    CHECK(flag == 1, "D: MPI_Initialized is false after MPI_Init");
    int r2 = -1, s2size = -1;
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &r2));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &s2size));
    CHECK(r2 == wrank && s2size == wsize, "D: world rank %d size %d vs pset %d %d", r2, s2size,
          wrank, wsize);
    check_comm(MPI_COMM_WORLD, wsize, wrank, "D: MPI_COMM_WORLD");
    check_comm(wc, wsize, wrank, "D: session world beside MPI_COMM_WORLD");
    {
        MPI_Group all, ge, go;
        int ranks[64], ne = 0, no = 0, oranks[64];
        CHECK_MPI(MPI_Group_from_session_pset(s1, "mpi://WORLD", &all));
        for (i = 0; i < wsize && i < 128; i++) {
            if (i % 2 == 0)
                ranks[ne++] = i;
            else
                oranks[no++] = i;
        }
        /* "even" holds the even ranks, "odd" the odd ones plus rank 0: overlapping groups. */
        oranks[no++] = 0;
        CHECK_MPI(MPI_Group_incl(all, ne, ranks, &ge));
        CHECK_MPI(MPI_Group_incl(all, no, oranks, &go));
        even = odd = MPI_COMM_NULL;
        if (wrank == 0) {
            CHECK_MPI(MPI_Comm_create_from_group(go, "tag-odd", MPI_INFO_NULL, MPI_ERRORS_RETURN,
                                                 &odd));
            CHECK_MPI(MPI_Comm_create_from_group(ge, "tag-even", MPI_INFO_NULL,
                                                 MPI_ERRORS_RETURN, &even));
        } else if (wrank % 2 == 0) {
            CHECK_MPI(MPI_Comm_create_from_group(ge, "tag-even", MPI_INFO_NULL,
                                                 MPI_ERRORS_RETURN, &even));
        } else {
            CHECK_MPI(MPI_Comm_create_from_group(go, "tag-odd", MPI_INFO_NULL, MPI_ERRORS_RETURN,
                                                 &odd));
        }
        if (even != MPI_COMM_NULL)
            check_comm(even, ne, wrank, "D: even ranks");
        if (odd != MPI_COMM_NULL)
            check_comm(odd, no, wrank, "D: odd ranks and 0");
        if (even != MPI_COMM_NULL)
            CHECK_MPI(MPI_Comm_free(&even));
        if (odd != MPI_COMM_NULL)
            CHECK_MPI(MPI_Comm_free(&odd));
        CHECK_MPI(MPI_Group_free(&ge));
        CHECK_MPI(MPI_Group_free(&go));
        CHECK_MPI(MPI_Group_free(&all));
    }

    /* E */
    CHECK_MPI(MPI_Finalize());
    CHECK_MPI(MPI_Finalized(&flag));
    CHECK(flag == 1, "E: MPI_Finalized is false after MPI_Finalize");
    check_comm(wc, wsize, wrank, "E: session world after MPI_Finalize");
    CHECK_MPI(MPI_Comm_free(&wc));
    CHECK_MPI(MPI_Comm_free(&sc));
    CHECK_MPI(MPI_Session_finalize(&s2));
    CHECK(s2 == MPI_SESSION_NULL, "E: MPI_Session_finalize left the handle");
    if (wrank == 0) {
        printf("OK sessions\n");
        fflush(stdout);
    }
    CHECK_MPI(MPI_Session_finalize(&s1));
    return 0;
}
