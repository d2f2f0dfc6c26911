/*
 * connect_accept.c - two separately started jobs meet at a port.
 *
 *   connect_accept server FILE   rank 0 opens a port and writes its name to FILE; the job
 *                                accepts over MPI_COMM_WORLD (root 0)
 *   connect_accept client FILE   rank 0 reads the name from FILE; first tries the port with a
 *                                wrong secret (must fail with MPI_ERR_PORT at every rank, and the
 *                                server keeps waiting), then connects over MPI_COMM_WORLD
 *
 * Over the intercommunicator: point-to-point both ways (rank r with remote rank r), an
 * MPI_Allreduce (each side gets the other's sum), an MPI_Bcast from the server's rank 0, then
 * MPI_Intercomm_merge (server first), an MPI_Allreduce over the merged communicator, and
 * MPI_Comm_disconnect. Both jobs must have the same size.
 * Prints "OK connect_accept-server" / "OK connect_accept-client" on rank 0 when every check
 * held; "FAIL connect_accept: ..." otherwise.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;

static void check(int cond, int rank, const char *what)
{
    if (!cond) {
        fprintf(stderr, "FAIL connect_accept: rank %d: %s\n", rank, what);
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
    int rank, size, server, rc, i, noroom;
    char port[MPI_MAX_PORT_NAME];
    MPI_Comm inter = MPI_COMM_NULL, merged;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    noroom = argc == 4 && strcmp(argv[3], "noroom") == 0;
    if ((argc != 3 && !noroom) || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
        if (rank == 0)
            fprintf(stderr, "usage: connect_accept server|client FILE\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    server = strcmp(argv[1], "server") == 0;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    memset(port, 0, sizeof port);

    if (server) {
        if (rank == 0) {
            char tmp[4096];
            FILE *f;
            check(MPI_Open_port(MPI_INFO_NULL, port) == MPI_SUCCESS, rank, "MPI_Open_port");
            snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
            f = fopen(tmp, "w");
            check(f != NULL, rank, "cannot write the port file");
            if (f) {
                fprintf(f, "%s\n", port);
                fclose(f);
                rename(tmp, argv[2]);
            }
        }
        rc = MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
        if (noroom)
            check(rc != MPI_SUCCESS && class_of(rc) == MPI_ERR_NO_MEM, rank,
                  "MPI_Comm_accept without room did not fail with MPI_ERR_NO_MEM");
        else
            check(rc == MPI_SUCCESS, rank, "MPI_Comm_accept");
    } else {
        if (rank == 0) {
            FILE *f = NULL;
            for (i = 0; i < 3000 && !f; i++) {
                f = fopen(argv[2], "r");
                if (!f)
                    usleep(10000);
            }
            check(f != NULL, rank, "no port file from the server");
            if (f) {
                check(fgets(port, sizeof port, f) != NULL, rank, "empty port file");
                port[strcspn(port, "\n")] = 0;
                fclose(f);
            }
        }
        {
            /* The same address with another secret: refused at every rank. */
            char wrong[MPI_MAX_PORT_NAME];
            size_t n = strlen(port);
            memcpy(wrong, port, sizeof wrong);
            if (rank == 0 && n > 0)
                wrong[n - 1] = wrong[n - 1] == '0' ? '1' : '0';
            rc = MPI_Comm_connect(wrong, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
            check(rc != MPI_SUCCESS && class_of(rc) == MPI_ERR_PORT, rank,
                  "a wrong secret was not refused with MPI_ERR_PORT");
        }
        rc = MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
        if (noroom)
            check(rc != MPI_SUCCESS && class_of(rc) == MPI_ERR_NO_MEM, rank,
                  "MPI_Comm_connect to a job without room did not fail with MPI_ERR_NO_MEM");
        else
            check(rc == MPI_SUCCESS, rank, "MPI_Comm_connect");
    }
    if (noroom) {
        int all = 0;
        MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0 && all == 0)
            printf("OK connect_accept-%s\n", server ? "server" : "client");
        MPI_Finalize();
        return failures ? 1 : 0;
    }
    if (inter == MPI_COMM_NULL) {
        fprintf(stderr, "FAIL connect_accept: rank %d: no intercommunicator\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    {
        int flag = 0, rsize = 0;
        MPI_Comm_test_inter(inter, &flag);
        MPI_Comm_remote_size(inter, &rsize);
        check(flag && rsize == size, rank, "not an intercommunicator with the other job");
    }

    /* Point-to-point both ways. */
    {
        int out = server ? 1000 + rank : 2000 + rank, in = -1;
        if (server) {
            MPI_Send(&out, 1, MPI_INT, rank, 7, inter);
            MPI_Recv(&in, 1, MPI_INT, rank, 8, inter, MPI_STATUS_IGNORE);
            check(in == 2000 + rank, rank, "wrong value from the client");
        } else {
            MPI_Recv(&in, 1, MPI_INT, rank, 7, inter, MPI_STATUS_IGNORE);
            MPI_Send(&out, 1, MPI_INT, rank, 8, inter);
            check(in == 1000 + rank, rank, "wrong value from the server");
        }
    }
    /* A larger message (several fragments, rendezvous) from the server's rank 0. */
    {
        enum { N = 1 << 18 };
        int *buf = malloc(N * sizeof(int)), bad = 0;
        if (server && rank == 0) {
            for (i = 0; i < N; i++)
                buf[i] = i * 3 + 1;
            MPI_Send(buf, N, MPI_INT, 0, 9, inter);
        } else if (!server && rank == 0) {
            MPI_Recv(buf, N, MPI_INT, 0, 9, inter, MPI_STATUS_IGNORE);
            for (i = 0; i < N; i++)
                bad += buf[i] != i * 3 + 1;
            check(bad == 0, rank, "the large message arrived wrong");
        }
        free(buf);
    }
    /* Intercommunicator collectives. */
    {
        int mine = server ? rank + 1 : 100 * (rank + 1), sum = -1, want = 0, v = -1;
        for (i = 0; i < size; i++)
            want += server ? 100 * (i + 1) : i + 1;
        check(MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, inter) == MPI_SUCCESS, rank,
              "MPI_Allreduce on the intercommunicator");
        check(sum == want, rank, "MPI_Allreduce gave the wrong sum");
        if (server) {
            v = 42;
            MPI_Bcast(&v, 1, MPI_INT, rank == 0 ? MPI_ROOT : MPI_PROC_NULL, inter);
        } else {
            MPI_Bcast(&v, 1, MPI_INT, 0, inter);
            check(v == 42, rank, "MPI_Bcast from the server gave the wrong value");
        }
    }
    /* Merged: the server's ranks first. */
    {
        int mrank = -1, msize = 0, one, total = -1;
        check(MPI_Intercomm_merge(inter, server ? 0 : 1, &merged) == MPI_SUCCESS, rank,
              "MPI_Intercomm_merge");
        MPI_Comm_rank(merged, &mrank);
        MPI_Comm_size(merged, &msize);
        check(msize == 2 * size, rank, "merged size");
        check(mrank == (server ? rank : size + rank), rank, "merged rank");
        one = mrank;
        MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, merged);
        check(total == (2 * size) * (2 * size - 1) / 2, rank, "merged MPI_Allreduce");
        MPI_Barrier(merged);
        MPI_Comm_free(&merged);
    }
    check(MPI_Comm_disconnect(&inter) == MPI_SUCCESS && inter == MPI_COMM_NULL, rank,
          "MPI_Comm_disconnect");
    if (server && rank == 0)
        check(MPI_Close_port(port) == MPI_SUCCESS, rank, "MPI_Close_port");

    {
        int all = 0;
        MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0 && all == 0)
            printf("OK connect_accept-%s\n", server ? "server" : "client");
    }
    MPI_Finalize();
    return failures ? 1 : 0;
}
