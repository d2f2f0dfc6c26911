/*
 * hello.c - the smallest useful MPI program, plus the basic environment queries.
 *
 * Every rank prints its rank, size, processor name and the first line of the library version.
 * Checks: Init_thread/Query_thread agree, Initialized is true and Finalized false while running,
 * Get_version is sane, rank < size, Wtick > 0 and Wtime does not go backwards, Type_size of the
 * common predefined types matches the C types, Finalized is true after MPI_Finalize.
 */
#include "stormtest.h"

static void check_type(MPI_Datatype t, int expected, const char *name)
{
    int size = -1;
    CHECK_MPI(MPI_Type_size(t, &size));
    CHECK(size == expected, "MPI_Type_size(%s) = %d, expected %d", name, size, expected);
}

int main(int argc, char **argv)
{
    int provided = -1, queried = -2, flag = 0, rank, size, len = 0, major = 0, minor = -1;
    char name[MPI_MAX_PROCESSOR_NAME + 1];
    char version[MPI_MAX_LIBRARY_VERSION_STRING + 1];

    CHECK_MPI(MPI_Initialized(&flag));
    if (flag) {
        fprintf(stderr, "FAIL hello: MPI_Initialized true before MPI_Init_thread\n");
        return 1;
    }
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "FAIL hello: MPI_Init_thread failed\n");
        return 1;
    }
    test_begin("hello");

    CHECK(provided == MPI_THREAD_SINGLE || provided == MPI_THREAD_FUNNELED ||
              provided == MPI_THREAD_SERIALIZED || provided == MPI_THREAD_MULTIPLE,
          "Init_thread provided = %d is not a thread level", provided);
    CHECK_MPI(MPI_Query_thread(&queried));
    CHECK(queried == provided, "Query_thread = %d, Init_thread provided %d", queried, provided);
    flag = 0;
    CHECK_MPI(MPI_Initialized(&flag));
    CHECK(flag, "MPI_Initialized false after MPI_Init_thread");
    flag = 1;
    CHECK_MPI(MPI_Finalized(&flag));
    CHECK(!flag, "MPI_Finalized true before MPI_Finalize");

    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size >= 1 && rank >= 0 && rank < size, "rank %d size %d", rank, size);

    CHECK_MPI(MPI_Get_version(&major, &minor));
    CHECK(major >= 1 && minor >= 0, "MPI_Get_version = %d.%d", major, minor);

    memset(name, 0, sizeof name);
    CHECK_MPI(MPI_Get_processor_name(name, &len));
    CHECK(len > 0 && len <= MPI_MAX_PROCESSOR_NAME && (int)strlen(name) == len,
          "processor name length %d, strlen %d", len, (int)strlen(name));

    memset(version, 0, sizeof version);
    len = 0;
    CHECK_MPI(MPI_Get_library_version(version, &len));
    {
        int slen = (int)strlen(version);
#ifdef OPEN_MPI
        /* Reference quirk: Open MPI 4.1 counts the terminating NUL in resultlen. */
        if (len == slen + 1)
            len = slen;
#endif
        CHECK(len > 0 && len <= MPI_MAX_LIBRARY_VERSION_STRING && slen == len,
              "library version length %d, strlen %d", len, slen);
    }
    version[strcspn(version, "\n")] = '\0'; /* first line only */

    {
        double tick = MPI_Wtick(), t0 = MPI_Wtime(), t1;
        int i;
        CHECK(tick > 0.0 && tick < 1.0, "MPI_Wtick = %g", tick);
        for (i = 0; i < 1000; i++) {
            t1 = MPI_Wtime();
            CHECK(t1 >= t0, "MPI_Wtime went backwards: %.9f then %.9f", t0, t1);
            t0 = t1;
        }
        t0 = MPI_Wtime();
        test_sleep_ms(20);
        t1 = MPI_Wtime();
        CHECK(t1 - t0 >= 0.015 && t1 - t0 < 10.0, "20 ms sleep measured as %.6f s", t1 - t0);
    }

    check_type(MPI_CHAR, (int)sizeof(char), "MPI_CHAR");
    check_type(MPI_SIGNED_CHAR, (int)sizeof(signed char), "MPI_SIGNED_CHAR");
    check_type(MPI_UNSIGNED_CHAR, (int)sizeof(unsigned char), "MPI_UNSIGNED_CHAR");
    check_type(MPI_BYTE, 1, "MPI_BYTE");
    check_type(MPI_SHORT, (int)sizeof(short), "MPI_SHORT");
    check_type(MPI_UNSIGNED_SHORT, (int)sizeof(unsigned short), "MPI_UNSIGNED_SHORT");
    check_type(MPI_INT, (int)sizeof(int), "MPI_INT");
    check_type(MPI_UNSIGNED, (int)sizeof(unsigned), "MPI_UNSIGNED");
    check_type(MPI_LONG, (int)sizeof(long), "MPI_LONG");
    check_type(MPI_UNSIGNED_LONG, (int)sizeof(unsigned long), "MPI_UNSIGNED_LONG");
    check_type(MPI_LONG_LONG, (int)sizeof(long long), "MPI_LONG_LONG");
    check_type(MPI_UNSIGNED_LONG_LONG, (int)sizeof(unsigned long long), "MPI_UNSIGNED_LONG_LONG");
    check_type(MPI_FLOAT, (int)sizeof(float), "MPI_FLOAT");
    check_type(MPI_DOUBLE, (int)sizeof(double), "MPI_DOUBLE");
    check_type(MPI_INT8_T, 1, "MPI_INT8_T");
    check_type(MPI_INT16_T, 2, "MPI_INT16_T");
    check_type(MPI_INT32_T, 4, "MPI_INT32_T");
    check_type(MPI_INT64_T, 8, "MPI_INT64_T");
    check_type(MPI_UINT64_T, 8, "MPI_UINT64_T");

    printf("hello from rank %d of %d on %s (MPI %d.%d, %s)\n", rank, size, name, major, minor,
           version);
    fflush(stdout);

    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        printf("OK hello\n");
        fflush(stdout);
    }
    CHECK_MPI(MPI_Finalize());
    flag = 0;
    MPI_Finalized(&flag);
    if (!flag) {
        fprintf(stderr, "FAIL hello: rank %d: MPI_Finalized false after MPI_Finalize\n", rank);
        return 1;
    }
    return 0;
}
