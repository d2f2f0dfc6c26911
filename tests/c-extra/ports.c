/*
 * ports.c - MPI_Open_port / MPI_Close_port. Each rank opens two ports: their names have
 * stormpi's form (stormpi-port:tcp:<IPv4>:<port>:<64 hex digits>) and differ; an open port
 * accepts a TCP connection at its address; after MPI_Close_port it no longer does, and closing
 * it again (or closing a name never opened) is MPI_ERR_PORT. Rank 0 publishes a port name and
 * every rank looks it up unchanged (left out with the argument "singleton": a process started
 * without a launcher has ports but no name service).
 * Prints "OK ports" on rank 0 when every check held; "FAIL ports: ..." otherwise.
 */
#include <arpa/inet.h>
#include <mpi.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int failures;

static void check(int cond, int rank, const char *what)
{
    if (!cond) {
        fprintf(stderr, "FAIL ports: rank %d: %s\n", rank, what);
        failures++;
    }
}

static int class_of(int rc)
{
    int cls = -1;
    MPI_Error_class(rc, &cls);
    return cls;
}

/* Whether a TCP connection to the port's address is accepted by the kernel; -1 if the name
 * does not have stormpi's form. */
static int connectable(const char *name)
{
    char ip[32], secret[80];
    unsigned port;
    struct sockaddr_in sa;
    int fd, ok;

    if (sscanf(name, "stormpi-port:tcp:%31[0-9.]:%u:%79s", ip, &port, secret) != 3 ||
        strlen(secret) != 64 || strspn(secret, "0123456789abcdef") != 64 || port == 0 ||
        port > 65535)
        return -1;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((unsigned short)port);
    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
        return -1;
    fd = socket(AF_INET, SOCK_STREAM, 0);
    ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

int main(int argc, char **argv)
{
    int rank, rc, all, names = !(argc > 1 && strcmp(argv[1], "singleton") == 0);
    char a[MPI_MAX_PORT_NAME], b[MPI_MAX_PORT_NAME], found[MPI_MAX_PORT_NAME];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    rc = MPI_Open_port(MPI_INFO_NULL, a);
    check(rc == MPI_SUCCESS, rank, "first MPI_Open_port failed");
    rc = MPI_Open_port(MPI_INFO_NULL, b);
    check(rc == MPI_SUCCESS, rank, "second MPI_Open_port failed");
    check(strcmp(a, b) != 0, rank, "two ports have the same name");
    check(connectable(a) == 1, rank, "an open port has another form or accepts no connection");
    check(connectable(b) == 1, rank, "an open port has another form or accepts no connection");

    if (names) {
        if (rank == 0) {
            rc = MPI_Publish_name("ports-test", MPI_INFO_NULL, a);
            check(rc == MPI_SUCCESS, rank, "publishing a port name failed");
        }
        MPI_Barrier(MPI_COMM_WORLD);
        rc = MPI_Lookup_name("ports-test", MPI_INFO_NULL, found);
        check(rc == MPI_SUCCESS && connectable(found) == 1, rank,
              "the looked-up port is not an open port");
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0)
            MPI_Unpublish_name("ports-test", MPI_INFO_NULL, a);
    }

    rc = MPI_Close_port(a);
    check(rc == MPI_SUCCESS, rank, "MPI_Close_port failed");
    check(connectable(a) == 0, rank, "a closed port still accepts connections");
    check(connectable(b) == 1, rank, "closing one port closed another");
    rc = MPI_Close_port(a);
    check(class_of(rc) == MPI_ERR_PORT, rank, "closing a closed port is not MPI_ERR_PORT");
    rc = MPI_Close_port("stormpi-port:tcp:127.0.0.1:1:00");
    check(class_of(rc) == MPI_ERR_PORT, rank, "closing a port never opened is not MPI_ERR_PORT");
    rc = MPI_Close_port(b);
    check(rc == MPI_SUCCESS, rank, "MPI_Close_port of the second port failed");

    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && all == 0)
        printf("OK ports\n");
    MPI_Finalize();
    return all != 0;
}
