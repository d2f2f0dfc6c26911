/*
 * probe_status_error.c - the probe calls leave the MPI_ERROR field of their status alone.
 *
 * The standard sets MPI_ERROR only in the statuses of the multiple-completion calls. Checked:
 * after MPI_Mprobe and MPI_Improbe (found, not found, MPI_PROC_NULL) the field still holds the
 * sentinel the caller put there, while source, tag and count describe the message; MPI_Probe
 * and MPI_Iprobe describe theirs alike (their MPI_ERROR is not checked: MPICH 4.0 writes it);
 * the messages are then received intact with MPI_Mrecv / MPI_Imrecv / MPI_Recv.
 *
 * usage: probe_status_error
 */
#include "stormtest.h"

#define SENTINEL (-31415)

static void expect(const MPI_Status *st, int src, int tag, int count, const char *what, int keeps)
{
    int n;
    CHECK(!keeps || st->MPI_ERROR == SENTINEL, "%s changed MPI_ERROR to %d", what,
          st->MPI_ERROR);
    CHECK(st->MPI_SOURCE == src && st->MPI_TAG == tag, "%s: source %d tag %d, expected %d %d",
          what, st->MPI_SOURCE, st->MPI_TAG, src, tag);
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &n));
    CHECK(n == count, "%s: count %d, expected %d", what, n, count);
}

int main(int argc, char **argv)
{
    int rank, size, i, flag, buf[8];
    MPI_Status st;
    MPI_Message msg;
    MPI_Request rq;

    MPI_Init(&argc, &argv);
    test_begin("probe_status_error");
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    if (rank == 1) {
        for (i = 0; i < 4; i++) {
            int j, out[8];
            for (j = 0; j < 8; j++)
                out[j] = 100 * i + j;
            CHECK_MPI(MPI_Send(out, i + 1, MPI_INT, 0, 10 + i, MPI_COMM_WORLD));
        }
    } else if (rank == 0) {
        st.MPI_ERROR = SENTINEL;
        CHECK_MPI(MPI_Mprobe(1, 10, MPI_COMM_WORLD, &msg, &st));
        expect(&st, 1, 10, 1, "MPI_Mprobe", 1);
        CHECK_MPI(MPI_Mrecv(buf, 8, MPI_INT, &msg, MPI_STATUS_IGNORE));
        CHECK(buf[0] == 0, "Mrecv got %d", buf[0]);

        st.MPI_ERROR = SENTINEL;
        CHECK_MPI(MPI_Improbe(1, 99, MPI_COMM_WORLD, &flag, &msg, &st));
        CHECK(!flag && st.MPI_ERROR == SENTINEL, "MPI_Improbe (nothing): flag %d MPI_ERROR %d",
              flag, st.MPI_ERROR);
        do {
            CHECK_MPI(MPI_Improbe(1, 11, MPI_COMM_WORLD, &flag, &msg, &st));
        } while (!flag);
        expect(&st, 1, 11, 2, "MPI_Improbe", 1);
        CHECK_MPI(MPI_Imrecv(buf, 8, MPI_INT, &msg, &rq));
        CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        CHECK(buf[1] == 101, "Imrecv got %d", buf[1]);

        st.MPI_ERROR = SENTINEL;
        CHECK_MPI(MPI_Probe(1, 12, MPI_COMM_WORLD, &st));
        expect(&st, 1, 12, 3, "MPI_Probe", 0);
        CHECK_MPI(MPI_Recv(buf, 8, MPI_INT, 1, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE));

        st.MPI_ERROR = SENTINEL;
        do {
            CHECK_MPI(MPI_Iprobe(1, 13, MPI_COMM_WORLD, &flag, &st));
        } while (!flag);
        expect(&st, 1, 13, 4, "MPI_Iprobe", 0);
        CHECK_MPI(MPI_Recv(buf, 8, MPI_INT, 1, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(buf[3] == 303, "Recv got %d", buf[3]);

        /* from MPI_PROC_NULL */
        st.MPI_ERROR = SENTINEL;
        CHECK_MPI(MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &msg, &st));
        CHECK(st.MPI_ERROR == SENTINEL && st.MPI_SOURCE == MPI_PROC_NULL,
              "MPI_Mprobe(MPI_PROC_NULL): MPI_ERROR %d source %d", st.MPI_ERROR, st.MPI_SOURCE);
        CHECK_MPI(MPI_Mrecv(buf, 8, MPI_INT, &msg, MPI_STATUS_IGNORE));
    }
    (void)size;
    return test_end();
}
