/*
 * large_message.c - messages over 2 GiB between two ranks (run at 2 ranks only; needs about
 * 3 GiB per rank).
 *
 * MPI_Send_c / MPI_Recv_c of 3 * 2^30 MPI_BYTE (a count no int can hold), the status's count
 * through MPI_Get_count_c (and MPI_UNDEFINED from MPI_Get_count); then the same buffer as
 * 3 * 2^27 MPI_DOUBLE broadcast with MPI_Bcast_c and reduced with MPI_Allreduce_c (MPI_SUM, in
 * place). The data is checked at 2^20 sampled positions and at both ends.
 */
#include "stormtest.h"

#include <string.h>

#define BYTES ((MPI_Count)3 << 30)
#define DOUBLES ((MPI_Count)3 << 27)
#define SAMPLES (1 << 20)

static unsigned char byte_at(MPI_Count i) { return (unsigned char)(test_mix64((uint64_t)i) >> 7); }

static MPI_Count sample(int k)
{
    if (k == 0)
        return 0;
    if (k == 1)
        return BYTES - 1;
    return (MPI_Count)(test_mix64((uint64_t)k * 0x9e3779b97f4a7c15ull) % (uint64_t)BYTES);
}

int main(int argc, char **argv)
{
    int rank, size, ci = 0;
    MPI_Count cc = 0;
    MPI_Status st;
    unsigned char *buf;
    double *d;

    MPI_Init(&argc, &argv);
    test_begin("large_message");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size == 2, "run at 2 ranks (got %d)", size);
    buf = test_malloc((size_t)BYTES);

    if (rank == 0) {
        for (MPI_Count i = 0; i < BYTES; i += 4096) {
            MPI_Count end = i + 4096 < BYTES ? i + 4096 : BYTES;
            for (MPI_Count j = i; j < end; j++)
                buf[j] = byte_at(j);
        }
        CHECK_MPI(MPI_Send_c(buf, BYTES, MPI_BYTE, 1, 7, MPI_COMM_WORLD));
    } else {
        memset(buf, 0, (size_t)BYTES);
        CHECK_MPI(MPI_Recv_c(buf, BYTES, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &st));
        CHECK_MPI(MPI_Get_count_c(&st, MPI_BYTE, &cc));
        CHECK(cc == BYTES, "MPI_Get_count_c gave %lld", (long long)cc);
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &ci));
        CHECK(ci == MPI_UNDEFINED, "MPI_Get_count of 3 GiB gave %d", ci);
        for (int k = 0; k < SAMPLES; k++) {
            MPI_Count i = sample(k);
            CHECK(buf[i] == byte_at(i), "byte %lld is %u, sent %u", (long long)i, buf[i], byte_at(i));
        }
    }

    /* The same memory as doubles: broadcast from rank 1, then summed in place. */
    d = (double *)buf;
    if (rank == 1)
        for (MPI_Count i = 0; i < DOUBLES; i++)
            d[i] = (double)(i % 1000003);
    else
        memset(d, 0, (size_t)BYTES);
    CHECK_MPI(MPI_Bcast_c(d, DOUBLES, MPI_DOUBLE, 1, MPI_COMM_WORLD));
    for (int k = 0; k < SAMPLES; k++) {
        MPI_Count i = sample(k) / 8;
        CHECK(d[i] == (double)(i % 1000003), "Bcast_c: double %lld is %g", (long long)i, d[i]);
    }
    CHECK_MPI(MPI_Allreduce_c(MPI_IN_PLACE, d, DOUBLES, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    for (int k = 0; k < SAMPLES; k++) {
        MPI_Count i = sample(k) / 8;
        CHECK(d[i] == 2.0 * (double)(i % 1000003), "Allreduce_c: double %lld is %g", (long long)i, d[i]);
    }
    free(buf);
    return test_end();
}
