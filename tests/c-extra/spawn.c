/*
 * spawn.c - MPI_Comm_spawn and MPI_Comm_spawn_multiple under stormrun. The same program is
 * parent, child and grandchild; MPI_Comm_get_parent tells which.
 *
 *   spawn basic      the job (2 ranks expected) spawns 2 children: point-to-point both ways
 *                    (parent rank r with child r), an intercommunicator MPI_Allreduce, then each
 *                    child job spawns 1 grandchild and reports what it sent back; both sides
 *                    MPI_Intercomm_merge (parents low) and MPI_Allreduce over the merge, then
 *                    MPI_Comm_disconnect, after which MPI_Comm_get_parent is MPI_COMM_NULL
 *   spawn multiple   MPI_Comm_spawn_multiple of two commands (1 x "A", 2 x "B"): each child
 *                    sends its letter and MPI_APPNUM to the parents' rank 0; MPI_Intercomm_merge
 *                    with the same `high` at both sides gives one block per side, in order
 *   spawn missing    a program that does not exist: MPI_ERR_SPAWN at every rank, errcodes too
 *   spawn abort      the child calls MPI_Abort after meeting the parents, who wait for a
 *                    message from it: stormrun must end the parents' job too (no OK line)
 *   spawn nompi      spawns `true`, which never calls MPI_Init: stormrun ends the job
 *   spawn gone       the child ends (MPI_Finalize) without a word; then the parents send to it:
 *                    the connection is refused at once, and the job must end promptly with a
 *                    message naming the process of another job (not wait for dpm_timeout)
 *   spawn loop N     N rounds of: spawn 2 children, data both ways, (every other round) a
 *                    merge freed again, MPI_Comm_disconnect; run with dpm_max_procs below 2 N,
 *                    so that it passes only if the slots of disconnected children come back
 *   spawn unsupported  (started without a launcher, or under Hydra)
 *                    MPI_ERR_UNSUPPORTED_OPERATION
 *   spawn wdir DIR   a child started by bare name with the info key path (this program's
 *                    directory) and wdir DIR reports its working directory, which must be DIR
 *
 * Prints "OK spawn-MODE" on the parents' rank 0 when every check held; "FAIL spawn: ..."
 * otherwise.
 */
#define _XOPEN_SOURCE 700
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int failures;
static const char *role = "parent";

static void check(int cond, int rank, const char *what)
{
    if (!cond) {
        fprintf(stderr, "FAIL spawn: %s rank %d: %s\n", role, rank, what);
        failures++;
    }
}

static int class_of(int rc)
{
    int cls = -1;
    MPI_Error_class(rc, &cls);
    return cls;
}

/* Point-to-point and an allreduce with the other side of `inter`; `base` tells the sides apart. */
static void exchange(MPI_Comm inter, int rank, int base, int other_base)
{
    int mine = base + rank, got = -1, remote, sum = -1, i, expect = 0;
    MPI_Comm_remote_size(inter, &remote);
    if (rank < remote) {
        check(MPI_Sendrecv(&mine, 1, MPI_INT, rank, 7, &got, 1, MPI_INT, rank, 7, inter,
                           MPI_STATUS_IGNORE) == MPI_SUCCESS, rank, "MPI_Sendrecv over the intercommunicator");
        check(got == other_base + rank, rank, "wrong value from the other side");
    }
    check(MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, inter) == MPI_SUCCESS, rank,
          "MPI_Allreduce over the intercommunicator");
    for (i = 0; i < remote; i++)
        expect += other_base + i;
    check(sum == expect, rank, "wrong intercommunicator MPI_Allreduce sum");
}

/* Merges `inter` (`high` on this side), checks an allreduce over it, disconnects both. */
static void merge_and_disconnect(MPI_Comm *inter, int rank, int high)
{
    MPI_Comm merged;
    int size, remote, local, one = 1, total = 0;
    MPI_Comm_size(*inter, &local);
    MPI_Comm_remote_size(*inter, &remote);
    check(MPI_Intercomm_merge(*inter, high, &merged) == MPI_SUCCESS, rank, "MPI_Intercomm_merge");
    MPI_Comm_size(merged, &size);
    check(size == local + remote, rank, "merged size");
    check(MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, merged) == MPI_SUCCESS, rank,
          "MPI_Allreduce over the merged communicator");
    check(total == size, rank, "merged MPI_Allreduce sum");
    MPI_Comm_free(&merged);
    check(MPI_Comm_disconnect(inter) == MPI_SUCCESS && *inter == MPI_COMM_NULL, rank,
          "MPI_Comm_disconnect");
}

/* The same `high` at both sides of an intercommunicator with another job: both sides agree on
 * which goes first, each side's processes stay in their order, one block per side. */
static void check_same_high(MPI_Comm inter, int rank, int side)
{
    MPI_Comm merged = MPI_COMM_NULL;
    int local, remote, size = 0, i, mine[2], all[2 * 16], blocks = 1;
    MPI_Comm_size(inter, &local);
    MPI_Comm_remote_size(inter, &remote);
    check(MPI_Intercomm_merge(inter, 0, &merged) == MPI_SUCCESS, rank,
          "MPI_Intercomm_merge with the same high at both sides across jobs");
    if (merged == MPI_COMM_NULL)
        return;
    MPI_Comm_size(merged, &size);
    check(size == local + remote && size <= 16, rank, "merged size (same high)");
    mine[0] = side;
    mine[1] = rank;
    check(MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, merged) == MPI_SUCCESS, rank,
          "MPI_Allgather over the merge (same high)");
    for (i = 1; i < size && size <= 16; i++) {
        if (all[2 * i] != all[2 * i - 2])
            blocks++;
        else
            check(all[2 * i + 1] == all[2 * i - 1] + 1, rank, "a side's order in the merge");
    }
    check(blocks == 2, rank, "the merge (same high) does not hold one block per side");
    check(all[1] == 0, rank, "the first side does not start at its rank 0");
    MPI_Comm_free(&merged);
}

static int child(MPI_Comm parent, int argc, char **argv)
{
    int rank, size, i;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
    if (argc >= 2 && strcmp(argv[1], "child") == 0) {
        /* The children of "basic": data with the parents, then a grandchild of their own. */
        MPI_Comm grand;
        int codes[1] = {-1}, from_grand = -1;
        char *args[] = {"grandchild", NULL};
        role = "child";
        exchange(parent, rank, 100, 0);
        check(MPI_Comm_spawn(argv[0], args, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &grand, codes)
                  == MPI_SUCCESS, rank, "the children's MPI_Comm_spawn");
        check(codes[0] == MPI_SUCCESS, rank, "the children's errcodes");
        exchange(grand, rank, 100, 1000);
        if (rank == 0)
            MPI_Recv(&from_grand, 1, MPI_INT, 0, 9, grand, MPI_STATUS_IGNORE);
        merge_and_disconnect(&grand, rank, 0);
        MPI_Bcast(&from_grand, 1, MPI_INT, 0, MPI_COMM_WORLD);
        check(from_grand == 4242, rank, "the grandchild's value");
        /* Tell the parents what the grandchild said. */
        MPI_Send(&from_grand, 1, MPI_INT, rank, 8, parent);
        merge_and_disconnect(&parent, rank, 1);
    } else if (argc >= 2 && strcmp(argv[1], "grandchild") == 0) {
        int v = 4242;
        role = "grandchild";
        exchange(parent, rank, 1000, 100);
        if (rank == 0)
            MPI_Send(&v, 1, MPI_INT, 0, 9, parent);
        merge_and_disconnect(&parent, rank, 1);
    } else if (argc >= 3 && strcmp(argv[1], "multi") == 0) {
        int *appnum, flag = 0, msg[2];
        role = "multi child";
        MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &appnum, &flag);
        msg[0] = argv[2][0];
        msg[1] = flag ? *appnum : -1;
        MPI_Send(msg, 2, MPI_INT, 0, 5, parent);
        check_same_high(parent, rank, 1);
        check(MPI_Comm_disconnect(&parent) == MPI_SUCCESS, rank, "MPI_Comm_disconnect");
    } else if (argc >= 3 && strcmp(argv[1], "loop") == 0) {
        role = "loop child";
        exchange(parent, rank, 100, 0);
        if (atoi(argv[2]) % 2 == 0)
            merge_and_disconnect(&parent, rank, 1);
        else
            check(MPI_Comm_disconnect(&parent) == MPI_SUCCESS, rank, "MPI_Comm_disconnect");
    } else if (argc >= 2 && strcmp(argv[1], "finalize") == 0) {
        MPI_Finalize();
        return 0;
    } else if (argc >= 2 && strcmp(argv[1], "abort") == 0) {
        role = "aborting child";
        MPI_Abort(MPI_COMM_WORLD, 3);
    } else if (argc >= 2 && strcmp(argv[1], "cwd") == 0) {
        char cwd[PATH_MAX] = "";
        role = "wdir child";
        check(getcwd(cwd, sizeof cwd) != NULL, rank, "getcwd");
        MPI_Send(cwd, (int)strlen(cwd) + 1, MPI_CHAR, 0, 6, parent);
        check(MPI_Comm_disconnect(&parent) == MPI_SUCCESS, rank, "MPI_Comm_disconnect");
    } else {
        check(0, rank, "started as a child with unknown arguments");
    }
    MPI_Comm_get_parent(&parent);
    check(parent == MPI_COMM_NULL, rank, "MPI_Comm_get_parent after the disconnect");
    (void)size;
    (void)i;
    MPI_Finalize();
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    int rank, size, rc, i;
    MPI_Comm parent, inter = MPI_COMM_NULL;
    const char *mode;

    MPI_Init(&argc, &argv);
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL)
        return child(parent, argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    mode = argc >= 2 ? argv[1] : "";

    if (strcmp(mode, "basic") == 0) {
        int codes[2] = {-1, -1}, remote = 0, from_grand = -1;
        char *args[] = {"child", NULL};
        rc = MPI_Comm_spawn(argv[0], args, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, codes);
        check(rc == MPI_SUCCESS, rank, "MPI_Comm_spawn");
        check(codes[0] == MPI_SUCCESS && codes[1] == MPI_SUCCESS, rank, "errcodes");
        if (rc == MPI_SUCCESS) {
            MPI_Comm_remote_size(inter, &remote);
            check(remote == 2, rank, "two children");
            exchange(inter, rank, 0, 100);
            if (rank < remote) {
                MPI_Recv(&from_grand, 1, MPI_INT, rank, 8, inter, MPI_STATUS_IGNORE);
                check(from_grand == 4242, rank, "what the children's grandchild said");
            }
            merge_and_disconnect(&inter, rank, 0);
        }
    } else if (strcmp(mode, "multiple") == 0) {
        char *cmds[2] = {argv[0], argv[0]};
        char *a_args[] = {"multi", "A", NULL}, *b_args[] = {"multi", "B", NULL};
        char **argvs[2] = {a_args, b_args};
        int counts[2] = {1, 2}, codes[3] = {-1, -1, -1}, remote = 0;
        MPI_Info infos[2] = {MPI_INFO_NULL, MPI_INFO_NULL};
        rc = MPI_Comm_spawn_multiple(2, cmds, argvs, counts, infos, 0, MPI_COMM_WORLD, &inter,
                                     codes);
        check(rc == MPI_SUCCESS, rank, "MPI_Comm_spawn_multiple");
        for (i = 0; i < 3; i++)
            check(codes[i] == MPI_SUCCESS, rank, "errcodes of MPI_Comm_spawn_multiple");
        if (rc == MPI_SUCCESS) {
            MPI_Comm_remote_size(inter, &remote);
            check(remote == 3, rank, "three children");
            if (rank == 0) {
                const int letters[3] = {'A', 'B', 'B'}, apps[3] = {0, 1, 1};
                for (i = 0; i < remote && i < 3; i++) {
                    int msg[2] = {0, 0};
                    MPI_Recv(msg, 2, MPI_INT, i, 5, inter, MPI_STATUS_IGNORE);
                    check(msg[0] == letters[i], rank, "a child ran the wrong command");
                    check(msg[1] == apps[i], rank, "a child's MPI_APPNUM");
                }
            }
            check_same_high(inter, rank, 0);
            check(MPI_Comm_disconnect(&inter) == MPI_SUCCESS, rank, "MPI_Comm_disconnect");
        }
    } else if (strcmp(mode, "loop") == 0 && argc >= 3) {
        int rounds = atoi(argv[2]), round;
        for (round = 0; round < rounds && failures == 0; round++) {
            char num[16], *args[] = {"loop", num, NULL};
            int codes[2] = {-1, -1};
            snprintf(num, sizeof num, "%d", round);
            rc = MPI_Comm_spawn(argv[0], args, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                                codes);
            check(rc == MPI_SUCCESS, rank, "MPI_Comm_spawn in the loop");
            if (rc != MPI_SUCCESS) {
                char msg[MPI_MAX_ERROR_STRING];
                int len = 0;
                MPI_Error_string(rc, msg, &len);
                fprintf(stderr, "round %d: %s\n", round, msg);
                break;
            }
            exchange(inter, rank, 0, 100);
            if (round % 2 == 0)
                merge_and_disconnect(&inter, rank, 0);
            else
                check(MPI_Comm_disconnect(&inter) == MPI_SUCCESS, rank, "MPI_Comm_disconnect");
        }
        check(round == rounds, rank, "the loop ended early");
    } else if (strcmp(mode, "abort") == 0 || strcmp(mode, "nompi") == 0) {
        char *args[] = {"abort", NULL};
        int nompi = strcmp(mode, "nompi") == 0, v = 0;
        rc = MPI_Comm_spawn(nompi ? "true" : argv[0], nompi ? MPI_ARGV_NULL : args, 1,
                            MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, MPI_ERRCODES_IGNORE);
        check(rc == MPI_SUCCESS, rank, "MPI_Comm_spawn");
        /* Never answered: the launcher ends this job. */
        if (rc == MPI_SUCCESS)
            MPI_Recv(&v, 1, MPI_INT, 0, 1, inter, MPI_STATUS_IGNORE);
        check(0, rank, "the job went on after its spawned job failed");
    } else if (strcmp(mode, "gone") == 0) {
        char *args[] = {"finalize", NULL};
        int v = 1;
        struct timespec pause = {1, 0};
        rc = MPI_Comm_spawn(argv[0], args, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                            MPI_ERRCODES_IGNORE);
        check(rc == MPI_SUCCESS, rank, "MPI_Comm_spawn");
        nanosleep(&pause, NULL); /* the child has gone by now */
        if (rc == MPI_SUCCESS && rank == 0) {
            MPI_Send(&v, 1, MPI_INT, 0, 1, inter);
            MPI_Recv(&v, 1, MPI_INT, 0, 1, inter, MPI_STATUS_IGNORE);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        check(0, rank, "the job went on after a send to a process that is gone");
    } else if (strcmp(mode, "unsupported") == 0) {
        rc = MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                            MPI_ERRCODES_IGNORE);
        check(class_of(rc) == MPI_ERR_UNSUPPORTED_OPERATION, rank,
              "MPI_Comm_spawn without stormrun is not MPI_ERR_UNSUPPORTED_OPERATION");
    } else if (strcmp(mode, "missing") == 0) {
        int codes[2] = {-1, -1};
        rc = MPI_Comm_spawn("/nonexistent/stormpi-no-such-program", MPI_ARGV_NULL, 2,
                            MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, codes);
        check(rc != MPI_SUCCESS && class_of(rc) == MPI_ERR_SPAWN, rank,
              "a missing program did not give MPI_ERR_SPAWN");
        check(codes[0] == MPI_ERR_SPAWN && codes[1] == MPI_ERR_SPAWN, rank,
              "errcodes of a missing program are not MPI_ERR_SPAWN");
        rc = MPI_Comm_spawn("stormpi-no-such-program", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0,
                            MPI_COMM_WORLD, &inter, MPI_ERRCODES_IGNORE);
        check(class_of(rc) == MPI_ERR_SPAWN, rank, "a program not in PATH: not MPI_ERR_SPAWN");
        /* The job goes on: a collective after the failures. */
        check(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS, rank, "a barrier after the failures");
    } else if (strcmp(mode, "wdir") == 0 && argc >= 3) {
        char dir[PATH_MAX], *slash, *args[] = {"cwd", NULL}, cwd[PATH_MAX] = "", want[PATH_MAX];
        MPI_Info info;
        snprintf(dir, sizeof dir, "%s", argv[0]);
        slash = strrchr(dir, '/');
        check(slash != NULL, rank, "run this test with the program's full path");
        if (slash) {
            *slash = 0;
            MPI_Info_create(&info);
            MPI_Info_set(info, "wdir", argv[2]);
            MPI_Info_set(info, "path", dir);
            rc = MPI_Comm_spawn(slash + 1, args, 1, info, 0, MPI_COMM_WORLD, &inter,
                                MPI_ERRCODES_IGNORE);
            check(rc == MPI_SUCCESS, rank, "MPI_Comm_spawn by name with path and wdir");
            MPI_Info_free(&info);
            if (rc == MPI_SUCCESS) {
                if (rank == 0) {
                    MPI_Recv(cwd, PATH_MAX, MPI_CHAR, 0, 6, inter, MPI_STATUS_IGNORE);
                    check(realpath(argv[2], want) != NULL, rank, "realpath");
                    check(strcmp(cwd, want) == 0, rank, "the child's working directory is not wdir");
                }
                check(MPI_Comm_disconnect(&inter) == MPI_SUCCESS, rank, "MPI_Comm_disconnect");
            }
        }
    } else {
        if (rank == 0)
            fprintf(stderr, "usage: spawn basic|multiple|loop N|missing|abort|nompi|gone|unsupported|wdir DIR\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && failures == 0)
        printf("OK spawn-%s\n", mode);
    MPI_Finalize();
    return failures ? 1 : 0;
}
