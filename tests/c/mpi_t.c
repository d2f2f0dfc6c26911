/*
 * mpi_t.c - the tools interface (MPI_T_*) and reductions on MPI_CHAR.
 *
 * Before MPI_Init: MPI_T_init_thread (twice: reference counted), every control variable listed
 * and found again by name, btl_sm_eager_limit read and compared with argv[1] (the value the
 * harness set through STORMPI_MCA_btl_sm_eager_limit), pml_max_requests written (MPI_Init must
 * take it: the pvar mpi_requests_max shows it), enums, categories, no events.
 * After MPI_Init: fixed variables refuse writes, an algorithm variable takes one; the unexpected
 * queue of a fresh communicator holds N messages and its high-water mark says N, the posted
 * queue and the request pool move with an MPI_Irecv, counters count sends and reset, and the
 * message count of 10 barriers shows which barrier algorithm the variable chose.
 * After MPI_Finalize: the tools interface still starts and reads.
 */
#include "stormtest.h"

#define N 7

static int cvar_index(const char *name)
{
    int i = -1;
    CHECK_MPI(MPI_T_cvar_get_index(name, &i));
    return i;
}

static int pvar_index(const char *name, int cls)
{
    int i = -1;
    CHECK_MPI(MPI_T_pvar_get_index(name, cls, &i));
    return i;
}

static int read_int_cvar(const char *name)
{
    MPI_T_cvar_handle h;
    int count = 0, v = -1;
    CHECK_MPI(MPI_T_cvar_handle_alloc(cvar_index(name), NULL, &h, &count));
    CHECK(count == 1, "%s: count %d", name, count);
    CHECK_MPI(MPI_T_cvar_read(h, &v));
    CHECK_MPI(MPI_T_cvar_handle_free(&h));
    CHECK(h == MPI_T_CVAR_HANDLE_NULL, "cvar handle not reset by free");
    return v;
}

static int write_int_cvar(const char *name, int v)
{
    MPI_T_cvar_handle h;
    int count = 0;
    CHECK_MPI(MPI_T_cvar_handle_alloc(cvar_index(name), NULL, &h, &count));
    int rc = MPI_T_cvar_write(h, &v);
    CHECK_MPI(MPI_T_cvar_handle_free(&h));
    return rc;
}

static unsigned long long pread(MPI_T_pvar_session s, MPI_T_pvar_handle h)
{
    unsigned long long v[8] = {0};
    CHECK_MPI(MPI_T_pvar_read(s, h, v));
    return v[0];
}

static void before_init(long expect_eager)
{
    int provided = -1, n = 0, rc;

    rc = MPI_T_cvar_get_num(&n);
    CHECK(rc == MPI_T_ERR_NOT_INITIALIZED, "cvar_get_num before MPI_T_init_thread: %d", rc);
    CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    CHECK(provided == MPI_THREAD_SINGLE, "provided %d", provided);
    CHECK_MPI(MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided));

    /* Every control variable has a name that finds it again. */
    CHECK_MPI(MPI_T_cvar_get_num(&n));
    CHECK(n > 30, "only %d control variables", n);
    for (int i = 0; i < n; i++) {
        char name[256], desc[1024];
        int name_len = sizeof name, desc_len = sizeof desc, verb, bind, scope;
        MPI_Datatype dt;
        MPI_T_enum en;
        CHECK_MPI(MPI_T_cvar_get_info(i, name, &name_len, &verb, &dt, &en, desc, &desc_len,
                                      &bind, &scope));
        CHECK(name_len == (int)strlen(name) + 1, "name_len %d for '%s'", name_len, name);
        CHECK(desc_len > 1, "%s has no description", name);
        CHECK(bind == MPI_T_BIND_NO_OBJECT, "%s bound to %d", name, bind);
        CHECK(dt == MPI_INT || dt == MPI_COUNT || dt == MPI_CHAR, "%s: datatype", name);
        CHECK(scope == MPI_T_SCOPE_READONLY || scope == MPI_T_SCOPE_ALL_EQ, "%s: scope", name);
        CHECK(cvar_index(name) == i, "%s found at another index", name);
    }
    {
        int len = 0, verb, bind, scope;
        MPI_Datatype dt;
        MPI_T_enum en;
        /* Only the length needed, with its NUL. */
        CHECK_MPI(MPI_T_cvar_get_info(cvar_index("btl_sm_eager_limit"), NULL, &len, &verb, &dt,
                                      &en, NULL, NULL, &bind, &scope));
        CHECK(len == (int)strlen("btl_sm_eager_limit") + 1, "length query gave %d", len);
        CHECK(dt == MPI_INT && en == MPI_T_ENUM_NULL, "btl_sm_eager_limit type");
        CHECK(scope == MPI_T_SCOPE_READONLY, "btl_sm_eager_limit scope %d", scope);
        rc = MPI_T_cvar_get_info(n, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
        CHECK(rc == MPI_T_ERR_INVALID_INDEX, "index past the end: %d", rc);
        int i;
        rc = MPI_T_cvar_get_index("no_such_parameter", &i);
        CHECK(rc == MPI_T_ERR_INVALID_NAME, "unknown name: %d", rc);
    }

    /* The value the environment set, before MPI_Init. */
    int eager = read_int_cvar("btl_sm_eager_limit");
    if (expect_eager > 0)
        CHECK(eager == expect_eager, "btl_sm_eager_limit %d, environment said %ld", eager,
              expect_eager);

    /* A write before MPI_Init is what MPI_Init takes. */
    CHECK_MPI(write_int_cvar("pml_max_requests", 5000));
    CHECK(read_int_cvar("pml_max_requests") == 5000, "pml_max_requests not written");
    rc = write_int_cvar("pml_max_requests", 1);
    CHECK(rc == MPI_T_ERR_INVALID, "out-of-range write: %d", rc);

    /* The algorithm choices are enumerations. */
    {
        int verb, bind, scope, num = 0, value = -1, len;
        MPI_Datatype dt;
        MPI_T_enum en;
        char name[64];
        CHECK_MPI(MPI_T_cvar_get_info(cvar_index("coll_barrier_algorithm"), NULL, NULL, &verb,
                                      &dt, &en, NULL, NULL, &bind, &scope));
        CHECK(dt == MPI_INT && en != MPI_T_ENUM_NULL, "coll_barrier_algorithm is no enum");
        CHECK(scope == MPI_T_SCOPE_ALL_EQ, "coll_barrier_algorithm scope %d", scope);
        len = sizeof name;
        CHECK_MPI(MPI_T_enum_get_info(en, &num, name, &len));
        CHECK(num == 4 && strcmp(name, "coll_barrier_algorithm") == 0, "enum %s of %d", name,
              num);
        len = sizeof name;
        CHECK_MPI(MPI_T_enum_get_item(en, 3, &value, name, &len));
        CHECK(value == 3 && strcmp(name, "linear") == 0, "item 3: %d %s", value, name);
        rc = MPI_T_enum_get_item(en, 4, &value, name, &len);
        CHECK(rc == MPI_T_ERR_INVALID_ITEM, "item past the end: %d", rc);
        CHECK(read_int_cvar("coll_barrier_algorithm") == 0, "barrier algorithm not auto");
    }

    /* Categories by framework. */
    {
        int ncat = 0, pml = -1, nc = 0, np = 0, nsub = -1, found = 0;
        CHECK_MPI(MPI_T_category_get_num(&ncat));
        CHECK(ncat >= 5, "%d categories", ncat);
        CHECK_MPI(MPI_T_category_get_index("pml", &pml));
        CHECK_MPI(MPI_T_category_get_info(pml, NULL, NULL, NULL, NULL, &nc, &np, &nsub));
        CHECK(nc > 0 && np > 0 && nsub == 0, "pml category: %d %d %d", nc, np, nsub);
        int idx[256];
        CHECK(nc <= 256, "too many");
        CHECK_MPI(MPI_T_category_get_cvars(pml, nc, idx));
        for (int i = 0; i < nc; i++)
            found += idx[i] == cvar_index("pml_max_requests");
        CHECK(found == 1, "pml_max_requests not in category pml");
        CHECK(np <= 256, "too many");
        CHECK_MPI(MPI_T_category_get_pvars(pml, np, idx));
        found = 0;
        for (int i = 0; i < np; i++)
            found += idx[i] == pvar_index("pml_eager_sent", MPI_T_PVAR_CLASS_COUNTER);
        CHECK(found == 1, "pml_eager_sent not in category pml");
    }

    /* No events, no event sources: every event index is invalid. */
    {
        int ne = -1, ns = -1;
        CHECK_MPI(MPI_T_event_get_num(&ne));
        CHECK_MPI(MPI_T_source_get_num(&ns));
        CHECK(ne == 0 && ns == 0, "events %d sources %d", ne, ns);
        rc = MPI_T_event_get_info(0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                  NULL);
        CHECK(rc == MPI_T_ERR_INVALID_INDEX, "event_get_info: %d", rc);
    }
}

int main(int argc, char **argv)
{
    long expect_eager = argc > 1 ? atol(argv[1]) : -1;
    int rc;

    before_init(expect_eager);

    CHECK_MPI(MPI_Init(&argc, &argv));
    test_begin("mpi_t");
    int rank, size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    rank = stormtest_rank;

    /* Values after MPI_Init are the engine's; fixed ones refuse writes. */
    if (expect_eager > 0)
        CHECK(read_int_cvar("btl_sm_eager_limit") == expect_eager, "eager limit after init");
    rc = write_int_cvar("btl_sm_eager_limit", 4096);
    CHECK(rc == MPI_T_ERR_CVAR_SET_NEVER, "write of a fixed variable after init: %d", rc);

    /* Performance variables. */
    MPI_T_pvar_session s;
    MPI_T_pvar_handle unex, high, posted, eager, btl_bytes, req_used, req_max;
    MPI_Comm comm;
    int count = 0;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    CHECK_MPI(MPI_T_pvar_session_create(&s));
    CHECK_MPI(MPI_T_pvar_handle_alloc(
        s, pvar_index("pml_ob1_unexpected_queue_length", MPI_T_PVAR_CLASS_LEVEL), &comm, &unex,
        &count));
    CHECK(count == 1, "count %d", count);
    CHECK_MPI(MPI_T_pvar_handle_alloc(
        s, pvar_index("pml_ob1_unexpected_queue_high_water", MPI_T_PVAR_CLASS_HIGHWATERMARK),
        &comm, &high, &count));
    CHECK_MPI(MPI_T_pvar_handle_alloc(
        s, pvar_index("pml_ob1_posted_queue_length", MPI_T_PVAR_CLASS_LEVEL), &comm, &posted,
        &count));
    CHECK_MPI(MPI_T_pvar_handle_alloc(s, pvar_index("pml_eager_sent", MPI_T_PVAR_CLASS_COUNTER),
                                      NULL, &eager, &count));
    CHECK_MPI(MPI_T_pvar_handle_alloc(s, pvar_index("btl_bytes_sent", MPI_T_PVAR_CLASS_COUNTER),
                                      NULL, &btl_bytes, &count));
    int nbtl = count;
    CHECK(nbtl >= 1 && nbtl <= 8, "%d BTL modules", nbtl);
    CHECK_MPI(MPI_T_pvar_handle_alloc(
        s, pvar_index("mpi_requests_in_use", MPI_T_PVAR_CLASS_LEVEL), NULL, &req_used, &count));
    CHECK_MPI(MPI_T_pvar_handle_alloc(
        s, pvar_index("mpi_requests_max", MPI_T_PVAR_CLASS_SIZE), NULL, &req_max, &count));

    /* The write before MPI_Init reached the engine. */
    CHECK(pread(s, req_max) == 5000, "mpi_requests_max %llu, pml_max_requests was set to 5000",
          pread(s, req_max));

    /* Continuous variables: not started or stopped one by one, all at once is fine. */
    rc = MPI_T_pvar_start(s, unex);
    CHECK(rc == MPI_T_ERR_PVAR_NO_STARTSTOP, "start: %d", rc);
    CHECK_MPI(MPI_T_pvar_start(s, MPI_T_PVAR_ALL_HANDLES));
    rc = MPI_T_pvar_reset(s, unex);
    CHECK(rc == MPI_T_ERR_PVAR_NO_WRITE, "reset of a level: %d", rc);

    /* Rank 1 sends N messages that rank 0 has not asked for yet. */
    CHECK(pread(s, unex) == 0 && pread(s, high) == 0, "fresh communicator has unexpected");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    unsigned long long before_eager = pread(s, eager);
    unsigned long long bytes0[8] = {0}, bytes1[8] = {0};
    CHECK_MPI(MPI_T_pvar_read(s, btl_bytes, bytes0));
    if (rank == 1) {
        for (int i = 0; i < N; i++)
            CHECK_MPI(MPI_Send(&i, 1, MPI_INT, 0, 5, comm));
        unsigned long long sent = pread(s, eager) - before_eager;
        CHECK(sent == N, "pml_eager_sent moved by %llu for %d sends", sent, N);
        CHECK_MPI(MPI_T_pvar_read(s, btl_bytes, bytes1));
        unsigned long long total = 0;
        for (int b = 0; b < nbtl; b++)
            total += bytes1[b] - bytes0[b];
        CHECK(total >= N * sizeof(int), "btl_bytes_sent moved by %llu", total);
        /* Counters reset per handle. */
        unsigned long long v[8];
        CHECK_MPI(MPI_T_pvar_readreset(s, eager, v));
        CHECK(v[0] == before_eager + N, "readreset gave %llu, expected %llu", v[0],
              before_eager + N);
        CHECK(pread(s, eager) == 0, "counter not reset");
        unsigned long long w = 100;
        CHECK_MPI(MPI_T_pvar_write(s, eager, &w));
        CHECK(pread(s, eager) == 100, "counter not written");
    }
    if (rank == 0) {
        double t0 = MPI_Wtime();
        int flag;
        while (pread(s, unex) < N) {
            CHECK(MPI_Wtime() - t0 < 20, "unexpected queue holds %llu of %d", pread(s, unex), N);
            CHECK_MPI(MPI_Iprobe(1, 99, comm, &flag, MPI_STATUS_IGNORE));
        }
        CHECK(pread(s, unex) == N, "unexpected queue length %llu", pread(s, unex));
        CHECK(pread(s, high) == N, "high-water mark %llu", pread(s, high));
        for (int i = 0; i < N; i++) {
            int v;
            CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 1, 5, comm, MPI_STATUS_IGNORE));
            CHECK(v == i, "message %d carried %d", i, v);
        }
        CHECK(pread(s, unex) == 0, "unexpected queue length %llu after receiving",
              pread(s, unex));
        CHECK(pread(s, high) == N, "high-water mark %llu after receiving", pread(s, high));

        /* A posted receive, and the request it holds. */
        unsigned long long used = pread(s, req_used);
        MPI_Request r;
        int v;
        CHECK_MPI(MPI_Irecv(&v, 1, MPI_INT, 1, 6, comm, &r));
        CHECK(pread(s, posted) == 1, "posted queue length %llu", pread(s, posted));
        CHECK(pread(s, req_used) == used + 1, "requests in use %llu, were %llu",
              pread(s, req_used), used);
        CHECK_MPI(MPI_Send(&v, 0, MPI_INT, 1, 7, comm));
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(v == 42, "got %d", v);
        CHECK(pread(s, posted) == 0, "posted queue length %llu after wait", pread(s, posted));
    }
    if (rank == 1) {
        int v = 42;
        CHECK_MPI(MPI_Recv(&v, 0, MPI_INT, 0, 7, comm, MPI_STATUS_IGNORE));
        v = 42;
        CHECK_MPI(MPI_Send(&v, 1, MPI_INT, 0, 6, comm));
    }

    /* Ranks past 1 wait here: their collectives on comm would queue on rank 0 meanwhile. */
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* An algorithm changes at run time, the same at every rank; collectives still agree. */
    /* Forced dissemination: ceil(log2(size)) messages per rank and barrier; linear: size - 1
     * from rank 0, one from each other rank. The counter shows which one ran. */
    {
        int rounds = 0;
        while ((1 << rounds) < size)
            rounds++;
        const int algs[2] = {1, 3};
        const unsigned long long want[2] = {10ull * rounds, rank == 0 ? 10ull * (size - 1) : 10};
        for (int a = 0; a < 2; a++) {
            CHECK_MPI(write_int_cvar("coll_barrier_algorithm", algs[a]));
            CHECK(read_int_cvar("coll_barrier_algorithm") == algs[a], "barrier algorithm not set");
            unsigned long long e0 = pread(s, eager);
            for (int i = 0; i < 10; i++)
                CHECK_MPI(MPI_Barrier(comm));
            unsigned long long sent = pread(s, eager) - e0;
            CHECK(sent == want[a], "10 barriers by algorithm %d sent %llu messages, not %llu",
                  algs[a], sent, want[a]);
        }
    }
    CHECK_MPI(write_int_cvar("coll_allreduce_algorithm", 2));
    rc = write_int_cvar("coll_allreduce_algorithm", 99);
    CHECK(rc == MPI_T_ERR_INVALID, "write of a value past the enumeration: %d", rc);
    {
        int x = rank + 1, sum = 0;
        CHECK_MPI(MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, comm));
        CHECK(sum == size * (size + 1) / 2, "allreduce by ring gave %d", sum);
    }
    CHECK_MPI(write_int_cvar("coll_barrier_algorithm", 0));
    CHECK_MPI(write_int_cvar("coll_allreduce_algorithm", 0));

    /* Reductions on MPI_CHAR, as Open MPI and MPICH accept them. */
    {
        char c = (char)(rank + 1), sum = 0, max = 0, min = 0;
        CHECK_MPI(MPI_Allreduce(&c, &sum, 1, MPI_CHAR, MPI_SUM, comm));
        CHECK_MPI(MPI_Allreduce(&c, &max, 1, MPI_CHAR, MPI_MAX, comm));
        CHECK_MPI(MPI_Allreduce(&c, &min, 1, MPI_CHAR, MPI_MIN, comm));
        CHECK(sum == size * (size + 1) / 2 && max == size && min == 1,
              "MPI_CHAR: sum %d max %d min %d", sum, max, min);
        signed char sc = (signed char)-rank, sp = 0;
        CHECK_MPI(MPI_Allreduce(&sc, &sp, 1, MPI_SIGNED_CHAR, MPI_MIN, comm));
        CHECK(sp == -(size - 1), "MPI_SIGNED_CHAR min %d", sp);
    }

    CHECK_MPI(MPI_T_pvar_handle_free(s, &unex));
    CHECK(unex == MPI_T_PVAR_HANDLE_NULL, "pvar handle not reset by free");
    rc = MPI_T_pvar_read(s, high, NULL);
    CHECK(rc == MPI_T_ERR_INVALID, "read into NULL: %d", rc);
    CHECK_MPI(MPI_T_pvar_session_free(&s));
    rc = MPI_T_pvar_read(s, high, NULL);
    CHECK(rc == MPI_T_ERR_INVALID_SESSION, "read in a freed session: %d", rc);
    CHECK_MPI(MPI_Comm_free(&comm));

    CHECK_MPI(MPI_T_finalize());
    CHECK_MPI(MPI_T_finalize());
    rc = MPI_T_finalize();
    CHECK(rc == MPI_T_ERR_NOT_INITIALIZED, "third MPI_T_finalize: %d", rc);

    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    MPI_Finalize();

    /* After MPI_Finalize the tools interface still starts and reads. */
    int provided;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS ||
        read_int_cvar("coll_barrier_algorithm") != 0 ||
        write_int_cvar("coll_barrier_algorithm", 1) != MPI_T_ERR_CVAR_SET_NEVER ||
        MPI_T_finalize() != MPI_SUCCESS) {
        fprintf(stderr, "FAIL mpi_t: rank %d: tools interface after MPI_Finalize\n", rank);
        return 1;
    }
    if (rank == 0) {
        printf("OK mpi_t\n");
        fflush(stdout);
    }
    return 0;
}
