/*
 * errors.c - argument errors reported with MPI_ERRORS_RETURN.
 *
 * With MPI_ERRORS_RETURN on MPI_COMM_WORLD (and MPI_COMM_SELF, for errors not tied to a
 * communicator), each kind of bad argument must return an error code whose class is the one the
 * MPI standard names:
 *   invalid rank (>= size, negative, MPI_ANY_SOURCE as a destination)      MPI_ERR_RANK
 *   invalid tag (negative, MPI_ANY_TAG on a send, > MPI_TAG_UB)            MPI_ERR_TAG
 *   negative count                                                         MPI_ERR_COUNT
 *   MPI_COMM_NULL, and a garbage handle where handles are integers         MPI_ERR_COMM
 *   MPI_DATATYPE_NULL                                                      MPI_ERR_TYPE
 *   NULL buffer with count > 0                                             MPI_ERR_BUFFER
 *   MPI_REQUEST_NULL given to Start, Request_free, Cancel                  MPI_ERR_REQUEST
 *   invalid root in Bcast / Reduce                                         MPI_ERR_ROOT
 *   MPI_OP_NULL in Reduce / Allreduce                                      MPI_ERR_OP
 * Also: the valid special cases succeed (MPI_PROC_NULL peers, MPI_Wait/MPI_Test on
 * MPI_REQUEST_NULL); MPI_Error_string gives a non-empty string for every code and class;
 * MPI_Error_class maps each class to itself; Comm_get_errhandler returns what was set; the
 * MPI_TAG_UB attribute is at least 32767; and the communicator works normally afterwards.
 * Every failed check is reported (not just the first) before the job is aborted.
 */
#include "stormtest.h"
#include <limits.h>

static int failures;

static const char *class_name(int cls)
{
#define C(x) if (cls == x) return #x;
    C(MPI_SUCCESS) C(MPI_ERR_BUFFER) C(MPI_ERR_COUNT) C(MPI_ERR_TYPE) C(MPI_ERR_TAG)
    C(MPI_ERR_COMM) C(MPI_ERR_RANK) C(MPI_ERR_REQUEST) C(MPI_ERR_ROOT) C(MPI_ERR_OP)
    C(MPI_ERR_ARG) C(MPI_ERR_UNKNOWN) C(MPI_ERR_TRUNCATE) C(MPI_ERR_OTHER) C(MPI_ERR_INTERN)
    C(MPI_ERR_IN_STATUS) C(MPI_ERR_PENDING)
#undef C
    return "(other)";
}

static void expect(int rc, int want, const char *call)
{
    int cls = -1, len = -1, rc2;
    char msg[MPI_MAX_ERROR_STRING + 1];
    if (want == MPI_SUCCESS) {
        if (rc != MPI_SUCCESS) {
            fprintf(stderr, "FAIL errors: rank %d: %s returned %d, expected MPI_SUCCESS\n",
                    stormtest_rank, call, rc);
            failures++;
        }
        return;
    }
    if (rc == MPI_SUCCESS) {
        fprintf(stderr, "FAIL errors: rank %d: %s returned MPI_SUCCESS, expected %s\n",
                stormtest_rank, call, class_name(want));
        failures++;
        return;
    }
    rc2 = MPI_Error_class(rc, &cls);
    if (rc2 != MPI_SUCCESS || cls != want) {
        fprintf(stderr, "FAIL errors: rank %d: %s returned code %d of class %d %s, expected %s (%d)\n",
                stormtest_rank, call, rc, cls, class_name(cls), class_name(want), want);
        failures++;
    }
    memset(msg, 0, sizeof msg);
    rc2 = MPI_Error_string(rc, msg, &len);
    if (rc2 != MPI_SUCCESS || len <= 0 || len > MPI_MAX_ERROR_STRING || (int)strlen(msg) != len) {
        fprintf(stderr, "FAIL errors: rank %d: Error_string for the code from %s: rc %d len %d "
                "strlen %d\n", stormtest_rank, call, rc2, len, (int)strlen(msg));
        failures++;
    }
}

/* Whether the library's version string starts with prefix (for documented reference quirks). */
static int lib_is(const char *prefix)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING + 1] = "";
    int len = 0;
    MPI_Get_library_version(v, &len);
    return strncmp(v, prefix, strlen(prefix)) == 0;
}

#define EXPECT(call, cls) expect((call), (cls), #call)

int main(int argc, char **argv)
{
    int rank, size, buf[8] = {0}, flag = 0, *tag_ub = NULL, i, sum = -1, count = -1;
    MPI_Status st;
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Errhandler eh;
    MPI_Comm dup;

    MPI_Init(&argc, &argv);
    test_begin("errors");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "Comm_get_errhandler did not return MPI_ERRORS_RETURN");
    CHECK_MPI(MPI_Errhandler_free(&eh));
    CHECK(eh == MPI_ERRHANDLER_NULL, "Errhandler_free did not set the handle to MPI_ERRHANDLER_NULL");

    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag));
    CHECK(flag && tag_ub != NULL && *tag_ub >= 32767, "MPI_TAG_UB attribute: flag %d value %d", flag,
          tag_ub ? *tag_ub : -1);

    /* ranks */
    EXPECT(MPI_Send(buf, 1, MPI_INT, size, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    EXPECT(MPI_Send(buf, 1, MPI_INT, -5, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    EXPECT(MPI_Send(buf, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    EXPECT(MPI_Isend(buf, 1, MPI_INT, size + 3, 0, MPI_COMM_WORLD, &req), MPI_ERR_RANK);
    EXPECT(MPI_Recv(buf, 1, MPI_INT, size, 0, MPI_COMM_WORLD, &st), MPI_ERR_RANK);
    EXPECT(MPI_Irecv(buf, 1, MPI_INT, -5, 0, MPI_COMM_WORLD, &req), MPI_ERR_RANK);
    EXPECT(MPI_Iprobe(size, 0, MPI_COMM_WORLD, &flag, &st), MPI_ERR_RANK);
    EXPECT(MPI_Sendrecv(buf, 1, MPI_INT, size, 0, buf + 1, 1, MPI_INT, rank, 0, MPI_COMM_WORLD, &st),
           MPI_ERR_RANK);

    /* tags */
    EXPECT(MPI_Send(buf, 1, MPI_INT, rank, -5, MPI_COMM_WORLD), MPI_ERR_TAG);
    EXPECT(MPI_Send(buf, 1, MPI_INT, rank, MPI_ANY_TAG, MPI_COMM_WORLD), MPI_ERR_TAG);
    EXPECT(MPI_Isend(buf, 1, MPI_INT, rank, -100, MPI_COMM_WORLD, &req), MPI_ERR_TAG);
    EXPECT(MPI_Recv(buf, 1, MPI_INT, rank, -5, MPI_COMM_WORLD, &st), MPI_ERR_TAG);
    EXPECT(MPI_Iprobe(rank, -5, MPI_COMM_WORLD, &flag, &st), MPI_ERR_TAG);
    if (tag_ub && *tag_ub < INT_MAX) {
        EXPECT(MPI_Send(buf, 1, MPI_INT, rank, *tag_ub + 1, MPI_COMM_WORLD), MPI_ERR_TAG);
        EXPECT(MPI_Irecv(buf, 1, MPI_INT, rank, *tag_ub + 1, MPI_COMM_WORLD, &req), MPI_ERR_TAG);
    }

    /* counts */
    EXPECT(MPI_Send(buf, -1, MPI_INT, rank, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
    EXPECT(MPI_Recv(buf, -1, MPI_INT, rank, 0, MPI_COMM_WORLD, &st), MPI_ERR_COUNT);
    EXPECT(MPI_Isend(buf, -7, MPI_INT, rank, 0, MPI_COMM_WORLD, &req), MPI_ERR_COUNT);
    EXPECT(MPI_Bcast(buf, -1, MPI_INT, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
    if (!lib_is("MPICH")) /* reference quirk: MPICH 4.0.2 does not check it and crashes */
        EXPECT(MPI_Allreduce(buf, buf + 1, -1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_COUNT);

    /* communicators */
    EXPECT(MPI_Send(buf, 1, MPI_INT, 0, 0, MPI_COMM_NULL), MPI_ERR_COMM);
    EXPECT(MPI_Recv(buf, 1, MPI_INT, 0, 0, MPI_COMM_NULL, &st), MPI_ERR_COMM);
    EXPECT(MPI_Comm_rank(MPI_COMM_NULL, &i), MPI_ERR_COMM);
    EXPECT(MPI_Comm_size(MPI_COMM_NULL, &i), MPI_ERR_COMM);
    EXPECT(MPI_Barrier(MPI_COMM_NULL), MPI_ERR_COMM);
    EXPECT(MPI_Comm_dup(MPI_COMM_NULL, &dup), MPI_ERR_COMM);
    if (sizeof(MPI_Comm) == sizeof(int)) {
        /* Integer handles (MPICH ABI): made-up values must be rejected, not dereferenced.  With
         * pointer handles (Open MPI) a garbage handle cannot be detected, so this is skipped. */
        static const unsigned int garbage[] = {0u,          0x5a5a5a5au, 0x840000ffu, 0xc4fffff0u,
                                               0x4c000000u, 0x8c000001u, 0x12345678u, 0xffffffffu,
                                               0x44000123u};
        int n = (int)(sizeof garbage / sizeof garbage[0]);
        if (lib_is("MPICH"))
            n--; /* reference quirk: MPICH 4.0.2 asserts on a builtin-comm handle out of range */
        for (i = 0; i < n; i++) {
            MPI_Comm bad;
            char what[96];
            memcpy(&bad, &garbage[i], sizeof bad);
            snprintf(what, sizeof what, "MPI_Send on garbage communicator 0x%08x", garbage[i]);
            expect(MPI_Send(buf, 1, MPI_INT, 0, 0, bad), MPI_ERR_COMM, what);
            snprintf(what, sizeof what, "MPI_Comm_size on garbage communicator 0x%08x", garbage[i]);
            expect(MPI_Comm_size(bad, &count), MPI_ERR_COMM, what);
        }
    }

    /* datatypes */
    EXPECT(MPI_Send(buf, 1, MPI_DATATYPE_NULL, rank, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
    EXPECT(MPI_Recv(buf, 1, MPI_DATATYPE_NULL, rank, 0, MPI_COMM_WORLD, &st), MPI_ERR_TYPE);
    EXPECT(MPI_Type_size(MPI_DATATYPE_NULL, &i), MPI_ERR_TYPE);
    EXPECT(MPI_Bcast(buf, 1, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);

    /* buffers */
    EXPECT(MPI_Send(NULL, 1, MPI_INT, rank, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);
    EXPECT(MPI_Recv(NULL, 4, MPI_INT, rank, 0, MPI_COMM_WORLD, &st), MPI_ERR_BUFFER);
    EXPECT(MPI_Isend(NULL, 2, MPI_DOUBLE, rank, 0, MPI_COMM_WORLD, &req), MPI_ERR_BUFFER);

    /* requests */
    req = MPI_REQUEST_NULL;
    EXPECT(MPI_Start(&req), MPI_ERR_REQUEST);
    EXPECT(MPI_Request_free(&req), MPI_ERR_REQUEST);
    EXPECT(MPI_Cancel(&req), MPI_ERR_REQUEST);
    EXPECT(MPI_Startall(1, &req), MPI_ERR_REQUEST);

    /* roots and ops */
    EXPECT(MPI_Bcast(buf, 1, MPI_INT, size, MPI_COMM_WORLD), MPI_ERR_ROOT);
    EXPECT(MPI_Bcast(buf, 1, MPI_INT, -7, MPI_COMM_WORLD), MPI_ERR_ROOT);
    EXPECT(MPI_Reduce(buf, buf + 1, 1, MPI_INT, MPI_SUM, size + 1, MPI_COMM_WORLD), MPI_ERR_ROOT);
    EXPECT(MPI_Allreduce(buf, buf + 1, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD), MPI_ERR_OP);
    EXPECT(MPI_Reduce(buf, buf + 1, 1, MPI_INT, MPI_OP_NULL, 0, MPI_COMM_WORLD), MPI_ERR_OP);

    /* valid special cases */
    EXPECT(MPI_Send(buf, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD), MPI_SUCCESS);
    st.MPI_SOURCE = st.MPI_TAG = 12345;
    EXPECT(MPI_Recv(buf, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st), MPI_SUCCESS);
    EXPECT(MPI_Get_count(&st, MPI_INT, &count), MPI_SUCCESS);
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && count == 0,
          "Recv from MPI_PROC_NULL: status source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG,
          count);
    EXPECT(MPI_Send(NULL, 0, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD), MPI_SUCCESS);
    req = MPI_REQUEST_NULL;
    EXPECT(MPI_Wait(&req, &st), MPI_SUCCESS);
    CHECK(st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG,
          "Wait(MPI_REQUEST_NULL): status not empty (source %d tag %d)", st.MPI_SOURCE, st.MPI_TAG);
    flag = 0;
    EXPECT(MPI_Test(&req, &flag, &st), MPI_SUCCESS);
    CHECK(flag, "Test(MPI_REQUEST_NULL) returned flag = false");

    /* classes: Error_class is the identity on classes, Error_string non-empty */
    {
        static const int classes[] = {MPI_SUCCESS, MPI_ERR_BUFFER, MPI_ERR_COUNT, MPI_ERR_TYPE,
                                      MPI_ERR_TAG, MPI_ERR_COMM, MPI_ERR_RANK, MPI_ERR_REQUEST,
                                      MPI_ERR_ROOT, MPI_ERR_OP, MPI_ERR_ARG, MPI_ERR_UNKNOWN,
                                      MPI_ERR_TRUNCATE, MPI_ERR_OTHER, MPI_ERR_INTERN,
                                      MPI_ERR_IN_STATUS, MPI_ERR_PENDING};
        for (i = 0; i < (int)(sizeof classes / sizeof classes[0]); i++) {
            int cls = -1, len = -1;
            char msg[MPI_MAX_ERROR_STRING + 1];
            CHECK_MPI(MPI_Error_class(classes[i], &cls));
            CHECK(cls == classes[i], "Error_class(%s = %d) = %d", class_name(classes[i]), classes[i],
                  cls);
            memset(msg, 0, sizeof msg);
            CHECK_MPI(MPI_Error_string(classes[i], msg, &len));
            CHECK(len > 0 && (int)strlen(msg) == len, "Error_string(%s): len %d strlen %d",
                  class_name(classes[i]), len, (int)strlen(msg));
            CHECK(classes[i] == MPI_SUCCESS || classes[i] <= MPI_ERR_LASTCODE,
                  "class %s = %d above MPI_ERR_LASTCODE", class_name(classes[i]), classes[i]);
        }
    }

    /* the communicator still works */
    CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == size * (size - 1) / 2, "Allreduce after the errors: %d", sum);
    buf[0] = rank;
    CHECK_MPI(MPI_Sendrecv_replace(buf, 1, MPI_INT, (rank + 1) % size, 3, (rank + size - 1) % size,
                                   3, MPI_COMM_WORLD, &st));
    CHECK(buf[0] == (rank + size - 1) % size, "Sendrecv_replace after the errors: got %d", buf[0]);

    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    CHECK_MPI(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_ARE_FATAL, "Comm_get_errhandler did not return MPI_ERRORS_ARE_FATAL");
    CHECK_MPI(MPI_Errhandler_free(&eh));

    if (failures)
        FAIL("%d check(s) failed (see above)", failures);
    return test_end();
}
