/*
 * join.c - MPI_Comm_join over a socket two separately started jobs connected themselves.
 *
 *   join listen FILE    listens on a loopback TCP port, writes its number to FILE, accepts
 *   join connect FILE   reads the number from FILE and connects
 *
 * Both then call MPI_Comm_join on their socket: point-to-point both ways over the
 * intercommunicator, an MPI_Allreduce over it, MPI_Comm_disconnect. The socket stays the
 * caller's (it is closed afterwards). Run each as a job of one rank.
 * Prints "OK join-listen" / "OK join-connect" when every check held; "FAIL join: ..." otherwise.
 */
#include <arpa/inet.h>
#include <mpi.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int failures;

static void check(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "FAIL join: %s\n", what);
        failures++;
    }
}

int main(int argc, char **argv)
{
    int listening, fd = -1, i, rsize = 0, flag = 0;
    struct sockaddr_in sa;
    MPI_Comm inter = MPI_COMM_NULL;

    MPI_Init(&argc, &argv);
    if (argc != 3 || (strcmp(argv[1], "listen") && strcmp(argv[1], "connect"))) {
        fprintf(stderr, "usage: join listen|connect FILE\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    listening = strcmp(argv[1], "listen") == 0;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (listening) {
        socklen_t len = sizeof sa;
        char tmp[4096];
        FILE *f;
        int l = socket(AF_INET, SOCK_STREAM, 0);
        check(bind(l, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(l, 1) == 0 &&
                  getsockname(l, (struct sockaddr *)&sa, &len) == 0,
              "cannot listen on loopback");
        snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
        f = fopen(tmp, "w");
        check(f != NULL, "cannot write the port file");
        if (f) {
            fprintf(f, "%u\n", (unsigned)ntohs(sa.sin_port));
            fclose(f);
            rename(tmp, argv[2]);
        }
        fd = accept(l, NULL, NULL);
        close(l);
    } else {
        unsigned port = 0;
        FILE *f = NULL;
        for (i = 0; i < 3000 && !f; i++) {
            f = fopen(argv[2], "r");
            if (!f)
                usleep(10000);
        }
        check(f != NULL && fscanf(f, "%u", &port) == 1, "no port file from the listener");
        if (f)
            fclose(f);
        sa.sin_port = htons((unsigned short)port);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        check(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "cannot connect");
    }
    check(fd >= 0, "no connected socket");
    check(MPI_Comm_join(fd, &inter) == MPI_SUCCESS && inter != MPI_COMM_NULL, "MPI_Comm_join");
    if (inter == MPI_COMM_NULL)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Comm_test_inter(inter, &flag);
    MPI_Comm_remote_size(inter, &rsize);
    check(flag && rsize == 1, "not an intercommunicator with one remote process");
    {
        int out = listening ? 11 : 22, in = -1, sum = -1;
        if (listening) {
            MPI_Send(&out, 1, MPI_INT, 0, 1, inter);
            MPI_Recv(&in, 1, MPI_INT, 0, 2, inter, MPI_STATUS_IGNORE);
            check(in == 22, "wrong value from the connecting side");
        } else {
            MPI_Recv(&in, 1, MPI_INT, 0, 1, inter, MPI_STATUS_IGNORE);
            MPI_Send(&out, 1, MPI_INT, 0, 2, inter);
            check(in == 11, "wrong value from the listening side");
        }
        MPI_Allreduce(&out, &sum, 1, MPI_INT, MPI_SUM, inter);
        check(sum == (listening ? 22 : 11), "MPI_Allreduce over the joined intercommunicator");
    }
    check(MPI_Comm_disconnect(&inter) == MPI_SUCCESS && inter == MPI_COMM_NULL,
          "MPI_Comm_disconnect");
    close(fd);
    if (failures == 0)
        printf("OK join-%s\n", listening ? "listen" : "connect");
    MPI_Finalize();
    return failures ? 1 : 0;
}
