/*
 * names.c - MPI_Publish_name / MPI_Lookup_name / MPI_Unpublish_name through the launcher's name
 * service. Rank 0 publishes a service (a port name with a space in it, which the PMI wire must
 * carry), every rank looks it up and checks the port, a second publish of the same service and
 * lookups and unpublishes of unknown services fail with the classes MPI names
 * (MPI_ERR_SERVICE, MPI_ERR_NAME), and after rank 0 unpublishes, lookups fail.
 * Prints "OK names" on rank 0 when every check held; "FAIL names: ..." otherwise.
 * With argument "singleton" (run without a launcher) it checks that publishing answers
 * MPI_ERR_UNSUPPORTED_OPERATION and prints "OK names-singleton".
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int failures;

static void check(int cond, int rank, const char *what)
{
    if (!cond) {
        fprintf(stderr, "FAIL names: rank %d: %s\n", rank, what);
        failures++;
    }
}

static int class_of(int rc)
{
    int cls = -1;
    MPI_Error_class(rc, &cls);
    return cls;
}

int main(int argc, char **argv)
{
    int rank, size, rc, all;
    char port[MPI_MAX_PORT_NAME];
    char service[64];
    const char *published = "stormpi-test-port with space#42";

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    if (argc > 1 && strcmp(argv[1], "singleton") == 0) {
        rc = MPI_Publish_name("ocean", MPI_INFO_NULL, published);
        check(class_of(rc) == MPI_ERR_UNSUPPORTED_OPERATION, rank,
              "a singleton's publish is not MPI_ERR_UNSUPPORTED_OPERATION");
        if (failures == 0)
            printf("OK names-singleton\n");
        MPI_Finalize();
        return failures != 0;
    }

    /* A name per job, so that nothing of another run can interfere. */
    snprintf(service, sizeof service, "ocean-%d", size);
    if (rank == 0) {
        rc = MPI_Publish_name(service, MPI_INFO_NULL, published);
        check(rc == MPI_SUCCESS, rank, "publish failed");
    }
    MPI_Barrier(MPI_COMM_WORLD);

    memset(port, 'x', sizeof port);
    rc = MPI_Lookup_name(service, MPI_INFO_NULL, port);
    check(rc == MPI_SUCCESS, rank, "lookup of a published service failed");
    check(strcmp(port, published) == 0, rank, "lookup gave another port");

    rc = MPI_Lookup_name("no-such-service", MPI_INFO_NULL, port);
    check(class_of(rc) == MPI_ERR_NAME, rank, "lookup of an unknown service is not MPI_ERR_NAME");
    rc = MPI_Lookup_name(NULL, MPI_INFO_NULL, port);
    check(rc != MPI_SUCCESS, rank, "lookup of a NULL service succeeded");
    MPI_Barrier(MPI_COMM_WORLD);

    if (rank == size - 1) {
        rc = MPI_Publish_name(service, MPI_INFO_NULL, "another");
        check(class_of(rc) == MPI_ERR_SERVICE, rank,
              "publishing a published service is not MPI_ERR_SERVICE");
        rc = MPI_Unpublish_name("no-such-service", MPI_INFO_NULL, "p");
        check(class_of(rc) == MPI_ERR_SERVICE, rank,
              "unpublishing an unknown service is not MPI_ERR_SERVICE");
    }
    MPI_Barrier(MPI_COMM_WORLD);

    if (rank == 0) {
        rc = MPI_Unpublish_name(service, MPI_INFO_NULL, published);
        check(rc == MPI_SUCCESS, rank, "unpublish failed");
    }
    MPI_Barrier(MPI_COMM_WORLD);

    rc = MPI_Lookup_name(service, MPI_INFO_NULL, port);
    check(class_of(rc) == MPI_ERR_NAME, rank, "lookup after unpublish is not MPI_ERR_NAME");

    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && all == 0)
        printf("OK names\n");
    MPI_Finalize();
    return all != 0;
}
