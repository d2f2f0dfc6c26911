/*
 * instr.c - the small-message paths whose instruction counts ci/bench-instr.sh measures under
 * callgrind (noise-free: the same binary and inputs give the same counts).
 *
 *   instr pp N    0-byte MPI_Send / MPI_Recv ping-pong between ranks 0 and 1: 100 warm-up round
 *                 trips, then N. Per one-way message: (rank 0's + rank 1's count) / 2 / (N+100)
 *                 counts one send and one receive.
 *   instr win N   windows of 64 one-byte messages: rank 0 posts 64 MPI_Isend and MPI_Waitall,
 *                 rank 1 64 MPI_Irecv and MPI_Waitall, then rank 1 returns a 0-byte MPI_Send
 *                 that rank 0 MPI_Recv's; 10 warm-up windows, then N. Per message: a rank's
 *                 count / (64 (N+10)) (the acknowledgement is counted in: it is part of the
 *                 benchmark's windowed rate too).
 *   instr sr N    MPI_Sendrecv of one double between ranks 0 and 1 (each sends its count and
 *                 receives the other's): 100 warm-up calls, then N. Per call and rank.
 *   instr early N rank 0 sends 32 doubles (one MPI_Send each, tags 0..31), both ranks meet in
 *                 MPI_Barrier, then rank 1 MPI_Recv's them: every message is there before its
 *                 receive (the unexpected path). 10 warm-up rounds, then N. Per message: rank 1's
 *                 count inside MPI_Recv / (32 (N+10)).
 *   instr wait N  each rank MPI_Irecv, MPI_Send, MPI_Wait of one double (a halo exchange's
 *                 shape); test N: the same with an MPI_Test loop for the wait; probe N: rank 0
 *                 MPI_Send, then MPI_Probe + MPI_Recv of the answer, rank 1 the mirror (a
 *                 message of a size learnt first); persist N: MPI_Recv_init and MPI_Send_init
 *                 once, then MPI_Startall + MPI_Waitall of the two each round. 100 warm-up rounds,
 *                 then N; per round and rank.
 *
 * A third argument "hints" runs on a dup of MPI_COMM_WORLD carrying the four MPI-4 assertions
 * (mpi_assert_no_any_source, _no_any_tag, _allow_overtaking, _exact_length) instead; "dup" on a
 * plain dup (the baseline for "hints": a dup's ranks may map to processes another way than the
 * world's).
 *
 * Every received payload is checked, so a broken path is an error, not a cheap count.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 64
#define EARLY 32

static void die(int rank, const char *what)
{
    fprintf(stderr, "instr: rank %d: %s\n", rank, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3 || size != 2) {
        if (rank == 0)
            fprintf(stderr, "usage: instr pp|win|sr|early|wait|test|probe|persist N [hints|dup] (2 ranks)\n");
        MPI_Finalize();
        return 2;
    }
    long n = atol(argv[2]);
    int peer = 1 - rank;
    MPI_Comm comm = MPI_COMM_WORLD;
    if (argc > 3 && strcmp(argv[3], "hints") == 0) {
        MPI_Info info;
        MPI_Info_create(&info);
        MPI_Info_set(info, "mpi_assert_no_any_source", "true");
        MPI_Info_set(info, "mpi_assert_no_any_tag", "true");
        MPI_Info_set(info, "mpi_assert_allow_overtaking", "true");
        MPI_Info_set(info, "mpi_assert_exact_length", "true");
        MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &comm);
        MPI_Info_free(&info);
    } else if (argc > 3 && strcmp(argv[3], "dup") == 0) {
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    }
    if (strcmp(argv[1], "pp") == 0) {
        for (long i = 0; i < n + 100; i++) {
            MPI_Status st;
            if (rank == 0) {
                MPI_Send(NULL, 0, MPI_BYTE, peer, 1, comm);
                MPI_Recv(NULL, 0, MPI_BYTE, peer, 1, comm, &st);
            } else {
                MPI_Recv(NULL, 0, MPI_BYTE, peer, 1, comm, &st);
                MPI_Send(NULL, 0, MPI_BYTE, peer, 1, comm);
            }
            if (st.MPI_SOURCE != peer || st.MPI_TAG != 1)
                die(rank, "ping-pong status is wrong");
        }
    } else if (strcmp(argv[1], "win") == 0) {
        char buf[WINDOW];
        MPI_Request req[WINDOW];
        for (long w = 0; w < n + 10; w++) {
            if (rank == 0) {
                for (int k = 0; k < WINDOW; k++) {
                    buf[k] = (char)(w + k);
                    MPI_Isend(&buf[k], 1, MPI_CHAR, peer, 2, comm, &req[k]);
                }
                MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
                MPI_Recv(NULL, 0, MPI_BYTE, peer, 3, comm, MPI_STATUS_IGNORE);
            } else {
                for (int k = 0; k < WINDOW; k++) {
                    buf[k] = 0;
                    MPI_Irecv(&buf[k], 1, MPI_CHAR, peer, 2, comm, &req[k]);
                }
                MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
                /* Under mpi_assert_allow_overtaking the window may arrive in any order: each
                 * value once is what is checked then. */
                unsigned char seen[256] = {0};
                for (int k = 0; k < WINDOW; k++) {
                    if (comm == MPI_COMM_WORLD && buf[k] != (char)(w + k))
                        die(rank, "windowed payload is wrong");
                    unsigned char v = (unsigned char)buf[k], off = (unsigned char)(v - (unsigned char)w);
                    if (off >= WINDOW || seen[v]++)
                        die(rank, "windowed payload is wrong");
                }
                MPI_Send(NULL, 0, MPI_BYTE, peer, 3, comm);
            }
        }
    } else if (strcmp(argv[1], "sr") == 0) {
        for (long i = 0; i < n + 100; i++) {
            double mine = (double)(i * 2 + rank), theirs = -1;
            MPI_Status st;
            MPI_Sendrecv(&mine, 1, MPI_DOUBLE, peer, 4, &theirs, 1, MPI_DOUBLE, peer, 4, comm, &st);
            if (theirs != (double)(i * 2 + peer) || st.MPI_SOURCE != peer || st.MPI_TAG != 4)
                die(rank, "MPI_Sendrecv payload or status is wrong");
        }
    } else if (strcmp(argv[1], "early") == 0) {
        for (long r = 0; r < n + 10; r++) {
            if (rank == 0) {
                for (int k = 0; k < EARLY; k++) {
                    double v = (double)(r * EARLY + k);
                    MPI_Send(&v, 1, MPI_DOUBLE, peer, k, comm);
                }
            }
            MPI_Barrier(comm);
            if (rank == 1) {
                for (int k = 0; k < EARLY; k++) {
                    double v = -1;
                    MPI_Status st;
                    MPI_Recv(&v, 1, MPI_DOUBLE, peer, k, comm, &st);
                    if (v != (double)(r * EARLY + k) || st.MPI_TAG != k)
                        die(rank, "early payload or status is wrong");
                }
            }
            MPI_Barrier(comm);
        }
    } else if (strcmp(argv[1], "wait") == 0 || strcmp(argv[1], "test") == 0) {
        int test = argv[1][0] == 't';
        for (long i = 0; i < n + 100; i++) {
            double mine = (double)(i * 2 + rank), theirs = -1;
            MPI_Request r;
            MPI_Status st;
            int done = 0;
            MPI_Irecv(&theirs, 1, MPI_DOUBLE, peer, 5, comm, &r);
            MPI_Send(&mine, 1, MPI_DOUBLE, peer, 5, comm);
            if (test) {
                while (!done)
                    MPI_Test(&r, &done, &st);
            } else {
                MPI_Wait(&r, &st);
            }
            if (theirs != (double)(i * 2 + peer) || st.MPI_SOURCE != peer || st.MPI_TAG != 5)
                die(rank, "exchanged payload or status is wrong");
        }
    } else if (strcmp(argv[1], "probe") == 0) {
        for (long i = 0; i < n + 100; i++) {
            double mine = (double)(i * 2 + rank), theirs = -1;
            MPI_Status st;
            int count = -1;
            if (rank == 0)
                MPI_Send(&mine, 1, MPI_DOUBLE, peer, 6, comm);
            MPI_Probe(peer, 6, comm, &st);
            MPI_Get_count(&st, MPI_DOUBLE, &count);
            if (count != 1)
                die(rank, "probed count is wrong");
            MPI_Recv(&theirs, count, MPI_DOUBLE, peer, 6, comm, &st);
            if (rank == 1)
                MPI_Send(&mine, 1, MPI_DOUBLE, peer, 6, comm);
            if (theirs != (double)(i * 2 + peer))
                die(rank, "probed payload is wrong");
        }
    } else if (strcmp(argv[1], "persist") == 0) {
        double mine = -1, theirs = -1;
        MPI_Request r[2];
        MPI_Status st[2];
        MPI_Recv_init(&theirs, 1, MPI_DOUBLE, peer, 7, comm, &r[0]);
        MPI_Send_init(&mine, 1, MPI_DOUBLE, peer, 7, comm, &r[1]);
        for (long i = 0; i < n + 100; i++) {
            mine = (double)(i * 2 + rank);
            MPI_Startall(2, r);
            MPI_Waitall(2, r, st);
            if (theirs != (double)(i * 2 + peer) || st[0].MPI_SOURCE != peer || st[0].MPI_TAG != 7)
                die(rank, "persistent payload or status is wrong");
        }
        MPI_Request_free(&r[0]);
        MPI_Request_free(&r[1]);
    } else {
        die(rank, "unknown mode");
    }
    MPI_Finalize();
    return 0;
}
